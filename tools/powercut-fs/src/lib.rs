//! powercut-fs: a FUSE filesystem that keeps only what was fsynced, so that
//! killing it is a power cut. Tessera's power-loss tests put meta and the
//! datanodes on it, write under load, kill it and every process using it,
//! mount it again and check that every acknowledged object reads back whole.
#![forbid(unsafe_code)]

pub mod fuse;
pub mod volume;
