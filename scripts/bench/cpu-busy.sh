#!/bin/bash
# The busy fraction of all cores over SECONDS, from /proc/stat.
#   scripts/bench/cpu-busy.sh SECONDS
read -r _ u n s i w x y z _ < /proc/stat; t1=$((u+n+s+i+w+x+y+z)); i1=$((i+w))
sleep $1
read -r _ u n s i w x y z _ < /proc/stat; t2=$((u+n+s+i+w+x+y+z)); i2=$((i+w))
echo "busy $(( 100 - 100*(i2-i1)/(t2-t1) ))%  iowait+idle $(( 100*(i2-i1)/(t2-t1) ))%"
