package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/agentjobs/jobs/pkg/jobs"
)

// mirror keeps files that mirror jobs' output, for the documents whose
// agents read a job's output with their own file tools: OpenClaw's
// offloaded log (bgexec_<sessionId>.log, past 10 KB) and Duragent's
// .duragent/processes/<handle>.log with its .meta.json. The database stays
// the record; a file is a copy of the job's stored output bytes (raw, both
// streams in the order the job wrote them), kept current while the server
// runs and brought up to date by every read that asks for it (sync).
//
//	m := newMirror(c)        // c: the scope's client
//	defer m.close()          // stops keeping files current; the files stay
//	err := m.add(ctx, mirrorSpec{
//		JobID:    id,
//		Path:     "/…/bgexec_" + id + ".log", // directories made 0700, the file 0600 (O_NOFOLLOW)
//		After:    10 << 10,                   // create it once the output passes 10 KB (0: at once)
//		MetaPath: "/…/" + id + ".meta.json",  // optional: written beside it by temp file + rename
//		Meta:     func(j jobs.Job) any { return …; }, // its content; rewritten when it changes
//	})
//	st, err := m.sync(ctx, id) // up to date now: st.Offloaded, st.Path, st.Bytes
//	err = m.clear(ctx, id)     // after c.Clear: the file holds what the database still holds (nothing)
//	m.remove(id)               // after c.Remove, or when the job is gone: stop and delete the files
//	st = m.state(id)           // where it stands, without reading the database
//
// add, sync and clear of a job not finished return jobs.ErrNotFound
// (wrapped) when the job is gone, having removed its files; a finished job
// copied to its end is not read again. A job whose files cannot be written
// (a read-only directory, a symlink where the file should be) is reported
// by sync's error and tried again on the next sync; the job itself is not
// touched. One goroutine keeps the files of unfinished jobs current: it
// starts with the first add, wakes when the database changes (at least once
// a second while a mirrored job runs), and removes the files of jobs that
// were deleted (their TTL expired) within 30 s; it ends when no job is
// mirrored any more, or at close, or when the client is closed.
//
// After a restart, add finds a file that holds the job's stored output
// (or its beginning) and appends to it; any other file is rewritten from
// the database. A clear or an eviction by the output cap done by another
// process (the CLI) is seen only when the file is rewritten: until then
// the file still holds the bytes the database dropped.
type mirror struct {
	c *jobs.Client

	mu     sync.Mutex
	files  map[string]*mirrorFile
	loop   bool // the goroutine runs
	gen    int  // counts adds and clears, so the loop sees one it raced
	stop   chan struct{}
	closed bool
	wg     sync.WaitGroup
}

// mirrorSpec is one job's mirror: the file of its output and, optionally,
// a metadata file.
type mirrorSpec struct {
	// JobID is the job's full id.
	JobID string
	// Path is the output file.
	Path string
	// After is how many bytes of output the job must pass before the file
	// is made (OpenClaw offloads past 10 KB); 0 makes it at once.
	After int64
	// MetaPath, when set, is a JSON file rewritten atomically (a temporary
	// file in the same directory, then rename) whenever Meta's value
	// changes.
	MetaPath string
	Meta     func(jobs.Job) any
}

// mirrorState is where a job's mirror stands.
type mirrorState struct {
	// Offloaded says the file exists (the output passed After).
	Offloaded bool
	// Path is the file, when Offloaded.
	Path string
	// Bytes is how many bytes the file holds.
	Bytes int64
}

type mirrorFile struct {
	spec mirrorSpec

	mu sync.Mutex // serialises syncs of this file
	// pos is the absolute output offset copied up to; made says the file
	// exists; size is its length; done says the job finished and was
	// copied to its end, so the loop leaves it alone.
	pos  int64
	made bool
	size int64
	done bool
	meta []byte // the metadata last written
}

// mirrorPage is how much output one read copies.
const mirrorPage = 1 << 20

// mirrorExpiryEvery is how often the loop looks for deleted jobs.
const mirrorExpiryEvery = 30 * time.Second

func newMirror(c *jobs.Client) *mirror {
	return &mirror{c: c, files: make(map[string]*mirrorFile), stop: make(chan struct{})}
}

// add starts mirroring a job (again, after a restart) and syncs it once.
// Adding a job already mirrored to the same path only syncs it.
func (m *mirror) add(ctx context.Context, spec mirrorSpec) (mirrorState, error) {
	m.mu.Lock()
	f, ok := m.files[spec.JobID]
	if !ok || f.spec.Path != spec.Path {
		f = &mirrorFile{spec: spec}
		m.files[spec.JobID] = f
	}
	m.gen++
	m.mu.Unlock()
	st, err := m.syncFile(ctx, f)
	m.start()
	return st, err
}

// sync brings a job's file up to date. A job not mirrored is reported as
// not offloaded.
func (m *mirror) sync(ctx context.Context, id string) (mirrorState, error) {
	f := m.file(id)
	if f == nil {
		return mirrorState{}, nil
	}
	return m.syncFile(ctx, f)
}

// state is a job's mirror as it stands, without reading the database.
func (m *mirror) state(id string) mirrorState {
	f := m.file(id)
	if f == nil {
		return mirrorState{}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.state()
}

// clear empties a job's file after its output was cleared, and copies
// what the database holds from then on.
func (m *mirror) clear(ctx context.Context, id string) (mirrorState, error) {
	f := m.file(id)
	if f == nil {
		return mirrorState{}, nil
	}
	f.mu.Lock()
	f.pos, f.done = 0, false
	if f.made {
		if err := f.rewrite(); err != nil {
			f.mu.Unlock()
			return f.state(), err
		}
	}
	f.mu.Unlock()
	m.mu.Lock()
	m.gen++
	m.mu.Unlock()
	st, err := m.syncFile(ctx, f)
	m.start()
	return st, err
}

// remove stops mirroring a job and deletes its files.
func (m *mirror) remove(id string) {
	m.mu.Lock()
	f := m.files[id]
	delete(m.files, id)
	m.mu.Unlock()
	if f == nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.removeFiles()
}

// close stops the goroutine and waits for it. The files stay.
func (m *mirror) close() {
	m.mu.Lock()
	if !m.closed {
		m.closed = true
		close(m.stop)
	}
	m.mu.Unlock()
	m.wg.Wait()
}

func (m *mirror) file(id string) *mirrorFile {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.files[id]
}

func (f *mirrorFile) state() mirrorState {
	if !f.made {
		return mirrorState{}
	}
	return mirrorState{Offloaded: true, Path: f.spec.Path, Bytes: f.size}
}

// syncFile copies the job's new output to its file.
func (m *mirror) syncFile(ctx context.Context, f *mirrorFile) (mirrorState, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.done {
		// A finished job copied to its end writes nothing more (clear
		// starts it again); the loop's expiry finds it gone.
		return f.state(), nil
	}
	j, err := m.c.Get(ctx, f.spec.JobID)
	if errors.Is(err, jobs.ErrNotFound) {
		f.removeFiles()
		m.mu.Lock()
		if m.files[f.spec.JobID] == f {
			delete(m.files, f.spec.JobID)
		}
		m.mu.Unlock()
		return mirrorState{}, fmt.Errorf("mirror %s: %w", f.spec.JobID, err)
	}
	if err != nil {
		return f.state(), fmt.Errorf("mirror %s: %w", f.spec.JobID, err)
	}
	if !f.made {
		if j.OutputBytes <= f.spec.After {
			f.done = j.Status.Terminal()
			return f.state(), nil
		}
		if err := f.open(ctx, m.c, j); err != nil {
			return f.state(), err
		}
	}
	if err := f.copy(ctx, m.c, j.OutputBytes); err != nil {
		return f.state(), err
	}
	if err := f.writeMeta(j); err != nil {
		return f.state(), err
	}
	f.done = j.Status.Terminal() && f.pos >= j.OutputBytes
	return f.state(), nil
}

// open makes the file: one that holds the job's stored output so far, or
// its beginning, is appended to; anything else is rewritten.
func (f *mirrorFile) open(ctx context.Context, c *jobs.Client, j jobs.Job) error {
	if err := makeDir(filepath.Dir(f.spec.Path)); err != nil {
		return err
	}
	if n, ok := f.holdsBeginning(ctx, c, j); ok {
		f.made, f.size, f.pos = true, n, n
		return nil
	}
	f.pos = 0
	if err := f.rewrite(); err != nil {
		return err
	}
	f.made = true
	return nil
}

// mirrorCheck is how many bytes at the end of a file found by add are
// compared with the database before it is appended to.
const mirrorCheck = 4 << 10

// holdsBeginning says whether the file at the path is one a mirror wrote
// for the job (a regular file that ends as the job's output does at its
// length), and its length. Only a job's whole output counts: after a clear
// or an eviction the file is rewritten.
func (f *mirrorFile) holdsBeginning(ctx context.Context, c *jobs.Client, j jobs.Job) (int64, bool) {
	if j.EvictedBytes > 0 || j.DroppedBytes > 0 {
		return 0, false
	}
	r, err := openPrivate(f.spec.Path, os.O_RDONLY)
	if err != nil {
		return 0, false
	}
	defer r.Close()
	fi, err := r.Stat()
	if err != nil || fi.Size() > j.OutputBytes {
		return 0, false
	}
	n := fi.Size()
	k := min(n, mirrorCheck)
	if k == 0 {
		return 0, true
	}
	have := make([]byte, k)
	if _, err := r.ReadAt(have, n-k); err != nil {
		return 0, false
	}
	o, err := c.Log(ctx, f.spec.JobID, jobs.Range{ByteRange: true, Offset: n - k, Limit: k})
	if err != nil || o.Text != string(have) {
		return 0, false
	}
	return n, true
}

// rewrite empties the file (making it when missing).
func (f *mirrorFile) rewrite() error {
	w, err := openPrivate(f.spec.Path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC)
	if err != nil {
		return err
	}
	f.size = 0
	return w.Close()
}

// copy appends the output from f.pos up to total (or what the database
// holds of it) to the file.
func (f *mirrorFile) copy(ctx context.Context, c *jobs.Client, total int64) error {
	if f.pos >= total {
		return nil
	}
	w, err := openPrivate(f.spec.Path, os.O_WRONLY|os.O_APPEND)
	if err != nil {
		return err
	}
	defer w.Close()
	for f.pos < total {
		o, err := c.Log(ctx, f.spec.JobID, jobs.Range{ByteRange: true, Offset: f.pos, Limit: mirrorPage})
		if err != nil {
			return fmt.Errorf("mirror %s: %w", f.spec.JobID, err)
		}
		if _, err := io.WriteString(w, o.Text); err != nil {
			return fmt.Errorf("mirror %s: write %s: %w", f.spec.JobID, f.spec.Path, err)
		}
		f.size += int64(len(o.Text))
		if o.NextOffset <= f.pos {
			break
		}
		f.pos = o.NextOffset
		total = max(total, o.TotalBytes)
	}
	return nil
}

// writeMeta rewrites the metadata file when its content changed.
func (f *mirrorFile) writeMeta(j jobs.Job) error {
	if f.spec.MetaPath == "" || f.spec.Meta == nil {
		return nil
	}
	data, err := json.MarshalIndent(f.spec.Meta(j), "", "  ")
	if err != nil {
		return fmt.Errorf("mirror %s: metadata: %w", f.spec.JobID, err)
	}
	data = append(data, '\n')
	if string(data) == string(f.meta) {
		return nil
	}
	if err := writeAtomic(f.spec.MetaPath, data); err != nil {
		return err
	}
	f.meta = data
	return nil
}

func (f *mirrorFile) removeFiles() {
	for _, p := range []string{f.spec.Path, f.spec.MetaPath} {
		if p != "" {
			_ = os.Remove(p) // a file that is not there is what we want
		}
	}
	f.made, f.size, f.meta = false, 0, nil
}

// start runs the loop unless it runs or the mirror is closed.
func (m *mirror) start() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.loop || m.closed {
		return
	}
	m.loop = true
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		m.run()
	}()
}

// run keeps the files of unfinished jobs current, and looks for deleted
// jobs now and then, until no job is mirrored or the mirror (or its
// client) is closed.
func (m *mirror) run() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-m.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	ch := m.c.Changes()
	defer ch.Close()
	lastExpiry := time.Now()
	end := func() {
		m.mu.Lock()
		m.loop = false
		m.mu.Unlock()
	}
	for {
		// The lock order is a file's, then the mirror's (syncFile takes
		// the mirror's to drop a job that is gone): the files are listed
		// first, and looked at once the mirror's lock is released.
		m.mu.Lock()
		gen := m.gen
		all := make([]*mirrorFile, 0, len(m.files))
		for _, f := range m.files {
			all = append(all, f)
		}
		m.mu.Unlock()
		live := 0
		for _, f := range all {
			f.mu.Lock()
			done := f.done
			f.mu.Unlock()
			if done {
				continue
			}
			live++
			// Any other error is seen by the next read's sync.
			if _, err := m.syncFile(ctx, f); errors.Is(err, jobs.ErrClosed) {
				end()
				return
			}
		}
		if len(all) == 0 {
			m.mu.Lock()
			if m.gen == gen || m.closed {
				// Nothing was added since the files were listed.
				m.loop = false
				m.mu.Unlock()
				return
			}
			m.mu.Unlock()
			continue
		}
		if time.Since(lastExpiry) >= mirrorExpiryEvery {
			m.expire(ctx)
			lastExpiry = time.Now()
		}
		// With every job copied to its end, only the expiry is left to
		// do: a change of the database (a new add's job writing) still
		// wakes the loop.
		every := time.Second
		if live == 0 {
			every = mirrorExpiryEvery
		}
		if err := ch.Wait(ctx, every); err != nil {
			end()
			return
		}
	}
}

// expire removes the files of mirrored jobs that no longer exist (their
// TTL expired), without counting as an access to the others.
func (m *mirror) expire(ctx context.Context) {
	all, err := m.c.List(ctx, jobs.Filter{})
	if err != nil {
		return
	}
	exists := make(map[string]bool, len(all))
	for _, j := range all {
		exists[j.ID] = true
	}
	m.mu.Lock()
	var gone []string
	for id := range m.files {
		if !exists[id] {
			gone = append(gone, id)
		}
	}
	m.mu.Unlock()
	for _, id := range gone {
		m.remove(id)
	}
}

// makeDir makes dir and its missing parents with mode 0700, and refuses a
// dir that is a symlink or not a directory.
func makeDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("mirror: %w", err)
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("mirror: %w", err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("mirror: %s is not a directory", dir)
	}
	return nil
}

// openPrivate opens a file of the mirror: mode 0600 when it makes it, and
// never through a symlink (O_NOFOLLOW), so a link planted at the path
// cannot send a job's output elsewhere.
func openPrivate(path string, flag int) (*os.File, error) {
	f, err := os.OpenFile(path, flag|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("mirror: %w", err)
	}
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("mirror: %s is not a regular file", path)
	}
	return f, nil
}

// writeAtomic replaces path with data: a temporary file (0600) in the same
// directory, synced, then renamed over it, so a reader sees the old content
// or the new, never a part.
func writeAtomic(path string, data []byte) error {
	dir := filepath.Dir(path)
	if err := makeDir(dir); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return fmt.Errorf("mirror: %w", err)
	}
	name := tmp.Name()
	_, werr := tmp.Write(data)
	if werr == nil {
		werr = tmp.Sync()
	}
	if cerr := tmp.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Rename(name, path)
	}
	if werr != nil {
		_ = os.Remove(name)
		return fmt.Errorf("mirror: write %s: %w", path, werr)
	}
	return nil
}
