package logs

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/agentjobs/jobs/internal/privfile"
)

// The spool: output kept on disk while another process holds the lock.
//
// A locked database is not a full disk. When a flush cannot take the write
// lock within BusyTimeout (another process's long transaction, sqlite3 left
// in BEGIN), the batch is not retried in memory, which would stall the
// children once MaxPendingBytes wait, nor dropped: it is appended to a
// spool file beside the database, and so is everything queued after it,
// flush after flush, so that the pipes keep draining at the speed of a file
// append. Each flush then tries the lock again; once it has it, the spooled
// batches are committed oldest first, one transaction each, and new output
// joins the end of the spool until the spool is empty. Output is committed
// in the order it was written, so the stored output of every job stays a
// prefix of what it wrote whatever happens in between.
//
// The spool is bounded: MaxSpoolBytes, and the room on the disk (MinFree
// stays free, as for the database). Over MaxSpoolBytes, output waits in
// memory and Write blocks, as with a slow database; on a full disk it is
// dropped and counted, as a flush on a full disk drops it.
//
// The file is created 0600 in the database's directory and unlinked at
// once: only the supervisor's descriptor keeps it, so it leaves nothing
// behind however the supervisor ends. Output spooled by a supervisor that
// dies is lost with it, like the bytes in its memory and in the pipes: its
// jobs become lost, their stored output a prefix of what they wrote
// without holes, and the row counts only what was committed.

// DefaultMaxSpoolBytes bounds the output kept on disk while the database
// is locked.
const DefaultMaxSpoolBytes = 1 << 30

// errLocked is why a flush could not begin: another connection held the
// write lock past BusyTimeout.
var errLocked = errors.New("database locked by another process")

// spool is the appender's spool file and what it holds, in the order it
// was written; it is used only by the holder of a.flushing.
type spool struct {
	dir   string
	f     *os.File
	end   int64        // bytes appended to f since it was last emptied
	held  int64        // bytes of output in takes
	takes [][]jobBatch // spilled batches, oldest first; their chunks' data is in f
}

func (s *spool) empty() bool { return len(s.takes) == 0 }

// holds reports whether output of st waits in the spool.
func (s *spool) holds(st *jobState) bool {
	for _, t := range s.takes {
		for _, b := range t {
			if b.st == st {
				return true
			}
		}
	}
	return false
}

// spill appends the chunks of batch to the spool file and keeps batch, its
// chunks' data released, as the newest take.
func (s *spool) spill(batch []jobBatch) error {
	if s.f == nil {
		f, err := privfile.CreateTemp("spool", s.dir, ".jobs-spool-*")
		if err != nil {
			return err
		}
		if err := os.Remove(f.Name()); err != nil {
			f.Close()
			return fmt.Errorf("create spool: %w", err)
		}
		s.f = f
	}
	start := s.end
	var n int64
	for _, b := range batch {
		for _, c := range b.chunks {
			if _, err := s.f.WriteAt(c.data, s.end); err != nil {
				s.end = start // what was appended is overwritten next time
				return fmt.Errorf("write spool: %w", err)
			}
			c.spoolAt, c.size = s.end, len(c.data)
			s.end += int64(len(c.data))
			n += int64(len(c.data))
		}
	}
	for _, b := range batch {
		for _, c := range b.chunks {
			c.data = nil
		}
	}
	s.takes = append(s.takes, batch)
	s.held += n
	return nil
}

// load reads the data of the oldest take back from the file.
func (s *spool) load() ([]jobBatch, error) {
	t := s.takes[0]
	for _, b := range t {
		for _, c := range b.chunks {
			c.data = make([]byte, c.size)
			if _, err := s.f.ReadAt(c.data, c.spoolAt); err != nil {
				s.unload()
				return nil, fmt.Errorf("read spool: %w", err)
			}
		}
	}
	return t, nil
}

// unload releases the data of the oldest take, which stays spooled.
func (s *spool) unload() { s.unloadTake(s.takes[0]) }

// unloadTake releases the data of take.
func (s *spool) unloadTake(take []jobBatch) {
	for _, b := range take {
		for _, c := range b.chunks {
			c.data = nil
		}
	}
}

// pop forgets the oldest take, committed or dropped, and empties the file
// once nothing is left in it.
func (s *spool) pop() {
	for _, b := range s.takes[0] {
		s.held -= b.bytes
	}
	s.takes[0] = nil
	s.takes = s.takes[1:]
	if len(s.takes) == 0 {
		s.takes, s.end, s.held = nil, 0, 0
		if s.f != nil {
			_ = s.f.Truncate(0) // the space back; a failure only keeps it
		}
	}
}

func (s *spool) close() {
	if s.f != nil {
		s.f.Close()
		s.f = nil
	}
}

func spoolDir(dbPath string) string { return filepath.Dir(dbPath) }
