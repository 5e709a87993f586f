package db

import (
	"encoding/binary"
	"fmt"
	"io"
	"os"

	"github.com/agentjobs/jobs/internal/vocab"
)

// checkLostWAL refuses a database whose write-ahead log was deleted (or
// cut short) while it still held changes that were never copied into the
// database file, as happens when the -wal is removed after a crash.
// SQLite itself would open such a database without a word, as it was
// before those changes: the newest output, statuses and events gone. It
// must run before SQLite opens the file: the first connection rebuilds
// the WAL index, and the evidence with it.
//
// The evidence is the WAL index (-shm), which SQLite keeps in memory
// order: its header (two copies that agree) counts the frames in the WAL
// (mxFrame) and how many of them were copied into the database
// (nBackfill). Frames past nBackfill that the -wal no longer holds were
// lost. What cannot be seen: a -wal deleted together with its -shm, or a
// -shm written over since; a WAL whose frames were all copied before it
// went loses nothing and is not refused.
func checkLostWAL(path string) error {
	h, ok := readWALIndexHeader(path + "-shm")
	if !ok || h.mxFrame <= h.nBackfill {
		return nil
	}
	need := int64(walHeaderSize) + int64(h.mxFrame)*(walFrameHeaderSize+int64(h.pageSize))
	size := int64(0)
	if fi, err := os.Stat(path + "-wal"); err == nil {
		size = fi.Size()
	} else if !os.IsNotExist(err) {
		return nil // unreadable: SQLite says what it finds
	}
	if size >= need {
		return nil
	}
	lost := h.mxFrame - h.nBackfill
	what := "is missing"
	if size > 0 {
		what = fmt.Sprintf("is cut short (%d bytes of %d)", size, need)
	}
	return &vocab.CorruptError{Path: path, Cause: fmt.Sprintf(
		"its write-ahead log %s-wal %s, and %s-shm shows %d pages of changes committed to it that were never copied into the database (the newest output and statuses); to use the database without them, move %s-shm away",
		path, what, path, lost, path)}
}

const (
	walHeaderSize      = 32
	walFrameHeaderSize = 24
	walIndexVersion    = 3007000
	walIndexHeaderSize = 48 // one copy of WalIndexHdr
	walIndexReadSize   = 2*walIndexHeaderSize + 4
)

// walIndexHeader is what checkLostWAL reads of the WAL index header
// (SQLite's WalIndexHdr and the nBackfill of WalCkptInfo after it).
type walIndexHeader struct {
	mxFrame, nBackfill uint32
	pageSize           int
}

// readWALIndexHeader reads the header of the WAL index at shm. It reports
// false when there is none, or when it is not one SQLite finished writing
// (uninitialised, the two copies differ, an unknown version).
func readWALIndexHeader(shm string) (walIndexHeader, bool) {
	f, err := os.Open(shm)
	if err != nil {
		return walIndexHeader{}, false
	}
	defer f.Close()
	var b [walIndexReadSize]byte
	if _, err := io.ReadFull(f, b[:]); err != nil {
		return walIndexHeader{}, false
	}
	first, second := b[:walIndexHeaderSize], b[walIndexHeaderSize:2*walIndexHeaderSize]
	if string(first) != string(second) || first[12] != 1 {
		return walIndexHeader{}, false
	}
	// The WAL index is shared memory: in the machine's byte order.
	var order binary.ByteOrder = binary.LittleEndian
	if binary.BigEndian.Uint32(first[0:4]) == walIndexVersion {
		order = binary.BigEndian
	} else if binary.LittleEndian.Uint32(first[0:4]) != walIndexVersion {
		return walIndexHeader{}, false
	}
	sz := int(order.Uint16(first[14:16]))
	pageSize := sz&0xfe00 | sz&0x0001<<16
	if pageSize < 512 || pageSize > 65536 {
		return walIndexHeader{}, false
	}
	return walIndexHeader{
		mxFrame:   order.Uint32(first[16:20]),
		nBackfill: order.Uint32(b[2*walIndexHeaderSize:]),
		pageSize:  pageSize,
	}, true
}
