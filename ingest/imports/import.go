// Package imports is the file way in: it walks files, folders and mbox
// files and hands each input (a file, or one message of an mbox file) to
// the ingest pipeline, many at once, summing up what happened.
package imports

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/dmarcd/dmarcd/ingest"
)

// DefaultJobs is how many inputs an import has in flight at once:
// each waits for its commit, so the pipeline commits about this many
// reports per write transaction, and small reports are bound by how many
// share a commit (its fsync). Parsing is limited to one input per CPU
// inside the pipeline, and the records parsed and not yet committed to a
// budget of its own, so waiting jobs hold little more than an open file.
// The ingest benchmark of 20,000 reports of 5 records went from 31k (64
// in flight) over 51k (256) to 71k records/s (1,024).
const DefaultJobs = 1024

// MaxJobs bounds Options.Jobs (and import --jobs): each input in flight
// may hold an open file.
const MaxJobs = 4096

// Options configures Run. Ingest is required.
type Options struct {
	// Ingest stores one input: Pipeline.Ingest, or the admin socket
	// client's, which hands the input to a running server.
	Ingest ingest.IngestFunc
	// OrgID, when set, restricts the domain lookup of every input to one
	// organization (ingest.Arrival.OrgID).
	OrgID string
	// Jobs is the number of inputs in flight; default DefaultJobs.
	Jobs int
	// Progress, when set, is called after each input with its outcome and
	// the summary so far; calls do not overlap, and the summary must not
	// be kept past the call.
	Progress func(item Item, sum *Summary)
	// Fatal, when set, tells an Ingest error that stops the whole import
	// (the server went away) from one that fails a single input. After a
	// fatal error no input is started; those in flight are not counted
	// (whether they were stored is not known: a re-run finds them), and
	// Run returns a *StoppedError.
	Fatal func(error) bool
}

// StoppedError is Run's error when an Ingest error was fatal (Options.Fatal).
type StoppedError struct{ Cause error }

func (e *StoppedError) Error() string { return "import stopped: " + e.Cause.Error() }

func (e *StoppedError) Unwrap() error { return e.Cause }

// Item is the outcome of one input: a file, or one message of an
// mbox file.
type Item struct {
	// Name is the path as given or found in a folder, with "#N" appended
	// for message N (from 1) of an mbox file.
	Name   string
	Result *ingest.Result // nil when Err is set
	Err    error
	// Root is the index in Run's paths of the path the input was found
	// under (a file may be under several).
	Root int
}

// Summary counts what an import did. The lists are in input order.
type Summary struct {
	Files     int `json:"files"`  // files found
	Inputs    int `json:"inputs"` // files and mbox messages ingested or failed
	FilesDone int `json:"-"`      // files whose every input is done (progress)

	Imported       int `json:"imported"`        // aggregate reports stored
	Records        int `json:"records"`         // records of the aggregate reports stored
	FailureReports int `json:"failure_reports"` // failure reports stored
	TLSReports     int `json:"tls_reports"`     // SMTP TLS reports (RFC 8460) stored
	Duplicates     int `json:"duplicates"`      // reports already stored before
	// DifferentContent counts reports with the identity (reporter, report
	// id, domain) of one stored before but other content: not stored,
	// and not among Duplicates.
	DifferentContent int `json:"different_content"`
	Quarantined      int `json:"quarantined"` // inputs kept in the quarantine
	Failed           int `json:"failed"`      // inputs not read or not stored
	// RecordsSkipped counts records of stored reports the parser skipped
	// as unusable (an empty source IP, say).
	RecordsSkipped int `json:"records_skipped"`
	// Expired counts reports not stored for being older than the
	// retention window; ExpiredReports names them.
	Expired        int             `json:"expired"`
	ExpiredReports []ExpiredReport `json:"expired_reports"`

	Quarantine []Quarantined `json:"quarantine"`
	Failures   []FailedInput `json:"failures"`
	// Skipped are the files a folder held that are plainly no report by
	// their names (a README, a licence, Markdown notes, pictures): left
	// out, neither read nor quarantined. Not counted in Files.
	Skipped []SkippedFile `json:"skipped"`
}

// SkippedFile is a file of a folder left out of an import, and why.
type SkippedFile struct {
	File   string `json:"file"`
	Reason string `json:"reason"`
}

// Quarantined is one input kept in the quarantine.
type Quarantined struct {
	File   string `json:"file"`
	ID     string `json:"id"`
	Reason string `json:"reason"`
}

// ExpiredReport is a report left out for being older than the retention
// window, with the input that held it.
type ExpiredReport struct {
	File string `json:"file"`
	ingest.Expired
}

// FailedInput is one input that failed, or a path that could not be read.
type FailedInput struct {
	File   string `json:"file"`
	Reason string `json:"reason"`
}

// Run ingests every file under paths: files, folders (recursively, in
// name order, skipping names that start with a dot and not following
// symbolic links to folders), and mbox files, split into their messages.
// Names are used as they are, never expanded as patterns. A path or input
// that fails is counted and listed in the summary, and the import goes on;
// the error is ctx's when the import was cancelled (the summary then says
// what was done), or a configuration error.
func Run(ctx context.Context, paths []string, o Options) (*Summary, error) {
	if o.Ingest == nil {
		return nil, errors.New("ingest: imports.Options.Ingest is required")
	}
	if o.Jobs <= 0 {
		o.Jobs = DefaultJobs
	}
	ctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	im := &importer{o: o, sum: &Summary{}, held: map[int]Item{}, stop: stop}
	var files []collected
	for _, f := range collectFiles(paths) {
		switch {
		case f.skip != "":
			im.sum.Skipped = append(im.sum.Skipped, SkippedFile{File: f.name, Reason: f.skip})
			continue
		case f.fail == "":
			im.sum.Files++
		}
		files = append(files, f)
	}
	jobs := make(chan *importJob)
	var wg sync.WaitGroup
	for range o.Jobs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				im.run(ctx, j)
			}
		}()
	}
	im.produce(ctx, files, jobs)
	close(jobs)
	wg.Wait()
	im.finish()
	if im.fatal != nil {
		return im.sum, &StoppedError{Cause: im.fatal}
	}
	return im.sum, ctx.Err()
}

// importJob is one input. Exactly one of data, file and err is set.
type importJob struct {
	seq  int
	name string
	abs  string // name for the pipeline: absolute, so that quarantine entries stay findable
	data []byte
	file *os.File
	err  error
	fs   *importFile
	root int // index of the path given it was found under

	result *ingest.Result
}

// importFile tracks when every input of a file is done.
type importFile struct {
	pending  int
	produced bool
	root     int
}

type importer struct {
	o   Options
	mu  sync.Mutex
	seq int
	sum *Summary
	// seqs order the lists of the summary by input.
	qSeq, fSeq []int
	// fatal is the error that stopped the import (Options.Fatal); stop
	// cancels Run's context with it.
	fatal error
	stop  context.CancelCauseFunc
	// Progress is reported in input order: held keeps the items done
	// before an earlier one, shown is the last seq reported.
	held  map[int]Item
	shown int
}

func (im *importer) nextSeq() int {
	im.mu.Lock()
	defer im.mu.Unlock()
	im.seq++
	return im.seq
}

// produce opens the files in order and hands out their inputs.
func (im *importer) produce(ctx context.Context, files []collected, jobs chan<- *importJob) {
	for _, c := range files {
		if ctx.Err() != nil {
			return
		}
		if c.fail != "" {
			im.record(&importJob{seq: im.nextSeq(), name: c.name, err: errors.New(c.fail), root: c.root})
			continue
		}
		name := c.name
		st := &importFile{root: c.root}
		im.produceFile(ctx, name, st, jobs)
		// A file whose last input was handed out is marked produced with
		// it (see send): the input may be done before this line runs.
		// Here are the others: stopped early, or without input.
		im.mu.Lock()
		if !st.produced {
			st.produced = true
			if st.pending == 0 {
				im.sum.FilesDone++
			}
		}
		im.mu.Unlock()
	}
}

// testHookSent, when set (by tests), runs after each input is handed out:
// a delay there is a producer that a loaded machine deschedules.
var testHookSent func()

func (im *importer) produceFile(ctx context.Context, name string, st *importFile, jobs chan<- *importJob) {
	abs, err := filepath.Abs(name)
	if err != nil {
		abs = name
	}
	// send hands out one input; last says it is the file's last, so that
	// the file is marked produced before the input can be done: the
	// worker recording it then counts the file done (FilesDone), in the
	// progress of that very input.
	send := func(j *importJob, last bool) bool {
		j.seq, j.fs, j.root = im.nextSeq(), st, st.root
		im.mu.Lock()
		st.pending++
		st.produced = last
		im.mu.Unlock()
		select {
		case jobs <- j:
			if testHookSent != nil {
				testHookSent()
			}
			return true
		case <-ctx.Done():
			if j.file != nil {
				j.file.Close()
			}
			im.mu.Lock()
			st.pending--
			st.produced = false
			im.mu.Unlock()
			return false
		}
	}
	f, err := openFile(name)
	if err != nil {
		send(&importJob{name: name, err: err}, true)
		return
	}
	// ReadAt leaves the offset at the start: one call, not a read and a
	// seek back.
	var head [5]byte
	n, err := f.ReadAt(head[:], 0)
	if err == io.EOF {
		err = nil
	}
	if err != nil {
		f.Close()
		send(&importJob{name: name, err: err}, true)
		return
	}
	if !IsMbox(head[:n]) {
		send(&importJob{name: name, abs: abs, file: f}, true)
		return
	}
	defer f.Close()
	mr := NewMboxReader(f)
	for i := 1; ; i++ {
		msg, err := mr.Next()
		if errors.Is(err, io.EOF) {
			return
		}
		j := &importJob{name: name + "#" + strconv.Itoa(i), abs: abs + "#" + strconv.Itoa(i), data: msg, err: err}
		if err != nil && !errors.Is(err, ErrMboxMessageTooLarge) {
			// The file cannot be read on: report it once, under its name.
			j.name, j.err = name, fmt.Errorf("after %d messages: %w", i-1, err)
			send(j, true)
			return
		}
		if !send(j, !mr.More()) {
			return
		}
	}
}

func (im *importer) run(ctx context.Context, j *importJob) {
	if j.err == nil {
		var r io.Reader = bytes.NewReader(j.data)
		if j.file != nil {
			r = j.file
		}
		j.result, j.err = im.o.Ingest(ctx, r, ingest.Arrival{Source: ingest.SourceImport, OrgID: im.o.OrgID, Name: j.abs})
		if j.file != nil {
			j.file.Close()
		}
		if j.err == nil && j.result == nil {
			j.err = errors.New("ingest: no result")
		}
		if j.err != nil && im.isFatal(j.err) {
			return
		}
	}
	im.record(j)
}

// isFatal reports whether err stops the import: a fatal error (the first
// one stops the others), or any error once stopped.
func (im *importer) isFatal(err error) bool {
	im.mu.Lock()
	defer im.mu.Unlock()
	if im.fatal != nil {
		return true
	}
	if im.o.Fatal != nil && im.o.Fatal(err) {
		im.fatal = err
		im.stop(err)
		return true
	}
	return false
}

// record adds one finished input to the summary and reports progress.
func (im *importer) record(j *importJob) {
	im.mu.Lock()
	defer im.mu.Unlock()
	s := im.sum
	item := Item{Name: j.name, Result: j.result, Err: j.err, Root: j.root}
	nf, nq := len(s.Failures), len(s.Quarantine)
	s.Add(item)
	if len(s.Failures) > nf {
		im.fSeq = append(im.fSeq, j.seq)
	}
	if len(s.Quarantine) > nq {
		im.qSeq = append(im.qSeq, j.seq)
	}
	if j.fs != nil {
		j.fs.pending--
		if j.fs.produced && j.fs.pending == 0 {
			s.FilesDone++
		}
	}
	if im.o.Progress != nil {
		// In input order: hold an item until those before it are done.
		im.held[j.seq] = item
		for {
			next, ok := im.held[im.shown+1]
			if !ok {
				break
			}
			delete(im.held, im.shown+1)
			im.shown++
			im.o.Progress(next, s)
		}
	}
}

// Add counts one finished input: its reports, duplicates and records, and
// the lists of failures, quarantined inputs and expired reports, which
// take it at their end. An import adds its inputs as they finish; a client
// shown the inputs of an import in their order gets the same summary by
// adding them so (but Files and FilesDone, which it is told).
func (s *Summary) Add(it Item) {
	s.Inputs++
	if it.Err != nil {
		s.Failed++
		s.Failures = append(s.Failures, FailedInput{File: it.Name, Reason: reason(it.Err)})
		return
	}
	for _, o := range it.Result.Reports {
		switch {
		case o.DifferentContent:
			s.DifferentContent++
		case o.Duplicate:
			s.Duplicates++
		case o.Kind == ingest.KindFailure:
			s.FailureReports++
		case o.Kind == ingest.KindTLS:
			s.TLSReports++
		default:
			s.Imported++
			s.Records += o.Records
		}
	}
	s.RecordsSkipped += it.Result.RecordsSkipped
	for _, x := range it.Result.Expired {
		s.Expired++
		s.ExpiredReports = append(s.ExpiredReports, ExpiredReport{File: it.Name, Expired: x})
	}
	if it.Result.Quarantined != "" {
		s.Quarantined++
		s.Quarantine = append(s.Quarantine, Quarantined{File: it.Name, ID: it.Result.Quarantined, Reason: it.Result.Reason})
	}
}

// EmptyLists gives the summary's lists that are nil an empty one, as Run
// returns them (JSON [] rather than null).
func (s *Summary) EmptyLists() {
	if s.Quarantine == nil {
		s.Quarantine = []Quarantined{}
	}
	if s.Failures == nil {
		s.Failures = []FailedInput{}
	}
	if s.ExpiredReports == nil {
		s.ExpiredReports = []ExpiredReport{}
	}
	if s.Skipped == nil {
		s.Skipped = []SkippedFile{}
	}
}

// reason is an error message without the package prefixes that mean
// nothing to the person reading the summary.
func reason(err error) string {
	msg := err.Error()
	for _, p := range []string{"ingest: ", "dmarc: ", "server: "} {
		msg = strings.TrimPrefix(msg, p)
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		msg = pe.Op + ": " + pe.Err.Error()
	}
	return msg
}

func (im *importer) finish() {
	sortBy(im.sum.Quarantine, im.qSeq)
	sortBy(im.sum.Failures, im.fSeq)
	im.sum.EmptyLists()
}

func sortBy[T any](items []T, seqs []int) {
	idx := make([]int, len(items))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return seqs[idx[a]] < seqs[idx[b]] })
	sorted := make([]T, len(items))
	for i, k := range idx {
		sorted[i] = items[k]
	}
	copy(items, sorted)
}

// collected is a file to import, a path that cannot be read (fail says
// why), or a file of a folder left out (skip says why).
type collected struct {
	name, fail, skip string
	root             int // index of the path given
}

// notReportNames are the base names (without extension, lower case) of
// the files a folder of reports often holds beside them and that are
// never a report: a folder cloned from a repository or unpacked from an
// archive.
var notReportNames = map[string]bool{"readme": true, "license": true, "licence": true, "copying": true,
	"notice": true, "authors": true, "changelog": true, "changes": true, "contributing": true, "makefile": true}

// notReportExts are extensions (lower case) of documents, pictures and
// code: never a report, nor a mail or an mbox file holding one.
var notReportExts = map[string]bool{".md": true, ".markdown": true, ".rst": true, ".adoc": true, ".pdf": true,
	".png": true, ".jpg": true, ".jpeg": true, ".gif": true, ".svg": true, ".webp": true, ".ico": true,
	".html": true, ".htm": true, ".css": true, ".js": true, ".go": true, ".py": true, ".sh": true,
	".yml": true, ".yaml": true, ".toml": true}

// skipReason says why a folder's file named base is left out of an
// import, "" when it is read. Only names that plainly say "no report"
// are left out; any other file is read and its content decides (a file
// named by itself is always read).
func skipReason(base string) string {
	lower := strings.ToLower(base)
	ext := filepath.Ext(lower)
	switch {
	case notReportNames[strings.TrimSuffix(lower, ext)] || notReportNames[lower]:
		return "not a report by its name (a README, licence or changelog); name the file itself to import it"
	case notReportExts[ext]:
		return "not a report by its extension " + ext + " (a document, picture or code); name the file itself to import it"
	}
	return ""
}

// collectFiles expands paths into the files to import and the paths that
// cannot be read, all in the order given (folders in name order).
func collectFiles(paths []string) []collected {
	var out []collected
	root := 0
	fail := func(name, reason string) { out = append(out, collected{name: name, fail: reason, root: root}) }
	for i, p := range paths {
		root = i
		fi, err := os.Stat(p)
		if err != nil {
			fail(p, reason(err))
			continue
		}
		if fi.Mode().IsRegular() {
			out = append(out, collected{name: p, root: i})
			continue
		}
		if !fi.IsDir() {
			fail(p, "not a regular file or folder")
			continue
		}
		err = filepath.WalkDir(p, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				fail(path, reason(err))
				if d != nil && d.IsDir() && path != p {
					return fs.SkipDir
				}
				return nil
			}
			if path != p && strings.HasPrefix(d.Name(), ".") {
				if d.IsDir() {
					return fs.SkipDir
				}
				return nil
			}
			switch {
			case d.Type().IsRegular():
				out = append(out, collected{name: path, root: i, skip: skipReason(d.Name())})
			case d.Type()&fs.ModeSymlink != 0:
				if fi, err := os.Stat(path); err == nil && fi.Mode().IsRegular() {
					out = append(out, collected{name: path, root: i, skip: skipReason(d.Name())})
				}
			}
			return nil
		})
		if err != nil {
			fail(p, reason(err))
		}
	}
	return out
}

// openFile opens name for reading as os.Open does, without offering the
// file to the network poller: on Linux os.Open sets a regular file
// non-blocking, fails to register it with epoll, and sets it back, four
// system calls more than the open itself, and a fifth when the file
// stream asks for its descriptor. An import opens every file it reads.
func openFile(name string) (*os.File, error) {
	fd, err := ignoringEINTR(func() (int, error) { return syscall.Open(name, syscall.O_RDONLY|syscall.O_CLOEXEC, 0) })
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	return os.NewFile(uintptr(fd), name), nil
}

func ignoringEINTR(fn func() (int, error)) (int, error) {
	for {
		n, err := fn()
		if err != syscall.EINTR {
			return n, err
		}
	}
}
