package db

import (
	"os"
	"sync"
)

// SQLite's locks on a database are POSIX advisory locks, which belong to
// the process rather than to a descriptor: closing any descriptor of the
// database file or of its -shm drops every lock the process holds on that
// file, SQLite's own among them. Another process then finds nobody using
// the database: as its last user it checkpoints it and deletes the -wal
// as it closes, and as its first it takes the -shm over, under the
// connections of this process, which go on using both ("database disk
// image is malformed", an I/O error on the shared memory). SQLite keeps
// the descriptors it opens itself from doing this; the checks that read
// those files through descriptors of their own (checkHeader,
// checkLostWAL) therefore run only while no connection of this process
// has the file open, and keep one from opening until they are done.
//
// Connections count here from just before the driver opens them until
// they close (connector.Connect). A connection opened to the same file
// without this package (an embedding program's own) is not counted.
var inUse struct {
	mu    sync.Mutex
	files []*fileUse
}

type fileUse struct {
	fi os.FileInfo
	n  int
}

// useFile counts a connection about to open the file fi describes, and
// returns the function that counts it closed.
func useFile(fi os.FileInfo) (release func()) {
	inUse.mu.Lock()
	defer inUse.mu.Unlock()
	u := findUse(fi)
	if u == nil {
		u = &fileUse{fi: fi}
		inUse.files = append(inUse.files, u)
	}
	u.n++
	var once sync.Once
	return func() {
		once.Do(func() {
			inUse.mu.Lock()
			defer inUse.mu.Unlock()
			if u.n--; u.n == 0 {
				for i, f := range inUse.files {
					if f == u {
						inUse.files = append(inUse.files[:i], inUse.files[i+1:]...)
						break
					}
				}
			}
		})
	}
}

// findUse returns the count of fi's file, nil if it has none; with
// inUse.mu held.
func findUse(fi os.FileInfo) *fileUse {
	for _, u := range inUse.files {
		if os.SameFile(u.fi, fi) {
			return u
		}
	}
	return nil
}

// unlessInUse runs check, which reads path's file or its -shm through
// descriptors of its own, when no connection of this process has that
// file open, and with none opening until check returns. A file in use
// was checked when its first connection opened, and SQLite has read it
// since: check is skipped.
func unlessInUse(path string, check func() error) error {
	inUse.mu.Lock()
	defer inUse.mu.Unlock()
	if fi, err := os.Stat(path); err == nil && findUse(fi) != nil {
		return nil
	}
	return check()
}
