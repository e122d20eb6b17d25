"""The block files a datanode holds, read from its data folder as the tests
see it: files of their own under blocks/ (`<key>.data` beside its `.crc`)
and records packed into volumes/ (`<n>.vol`, indexed by `<n>.idx`, deleted
by tombstones in `<n>.del`). The formats are described in
datanode/src/store/volumes/record.rs."""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

INDEX_ENTRY = struct.Struct(">QQB3xIQQQI")
TOMBSTONE = struct.Struct(">QB3xQI")
RECORD_FIXED = 48


@dataclass(frozen=True)
class Cell:
    """One committed block file: where its bytes are."""

    block: int
    index: int
    path: Path  # its data file, or the volume holding it
    offset: int  # of its first byte in `path`
    length: int
    mtime: float  # when it was committed (seconds)
    packed: bool

    @property
    def name(self) -> str:
        return f"{self.block:016x}_{self.index}"

    def read(self) -> bytes:
        with open(self.path, "rb") as f:
            f.seek(self.offset)
            return f.read(self.length)

    def flip(self, at: int, mask: int = 0x20) -> None:
        """Flips bits of byte `at` of the block file on disk."""
        with open(self.path, "r+b") as f:
            f.seek(self.offset + at)
            byte = f.read(1)[0]
            f.seek(self.offset + at)
            f.write(bytes([byte ^ mask]))


def cells(data_dir: Path) -> list[Cell]:
    """Every committed block file of the datanode whose data folder is `data_dir`.
    A file the datanode deletes while this reads (an orphan cleaned up, a
    volume compacted away) is left out, as it would be a moment later."""
    found = []
    for path in sorted((data_dir / "blocks").glob("*/*.data")):
        block, index = path.name.removesuffix(".data").rsplit("_", 1)
        try:
            stat = path.stat()
        except FileNotFoundError:
            continue
        found.append(Cell(int(block, 16), int(index), path, 0, stat.st_size, stat.st_mtime, False))
    for volume in sorted((data_dir / "volumes").glob("*.vol")):
        try:
            found.extend(packed_cells(volume))
        except FileNotFoundError:
            continue
    return found


def packed_cells(volume: Path) -> list[Cell]:
    """The live records of one volume, from its index (the datanode appends
    an entry once a record is durable) and its tombstones."""
    size = volume.stat().st_size
    index = volume.with_suffix(".idx")
    raw = index.read_bytes() if index.exists() else b""
    deleted = set()
    tombstones = volume.with_suffix(".del")
    if tombstones.exists():
        data = tombstones.read_bytes()
        for at in range(0, len(data) - TOMBSTONE.size + 1, TOMBSTONE.size):
            block, index_no, generation, _ = TOMBSTONE.unpack_from(data, at)
            deleted.add((block, index_no, generation))
    live = {}
    end = 0
    for at in range(0, len(raw) - INDEX_ENTRY.size + 1, INDEX_ENTRY.size):
        offset, block, index_no, bpc, length, generation, committed_ms, _ = INDEX_ENTRY.unpack_from(raw, at)
        if bpc == 0 or offset < end:
            break
        header = RECORD_FIXED + 4 * -(-length // bpc) + 4
        if offset + header + length > size:
            break
        end = offset + header + length
        if (block, index_no, generation) in deleted:
            continue
        live[(block, index_no)] = Cell(block, index_no, volume, offset + header, length, committed_ms / 1000, True)
    return list(live.values())


def cells_of(data_dirs: list[Path]) -> list[list[Cell]]:
    return [cells(d) for d in data_dirs]
