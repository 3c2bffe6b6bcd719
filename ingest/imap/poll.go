package imap

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/emersion/go-imap/v2"
)

// Mailbox names one mailbox to poll: its id (for the State) and the
// organization its reports are routed within.
type Mailbox struct {
	ID    string
	OrgID string
}

// Poll selects the folder and ingests every message past the remembered
// UID, in UID order, as the package documentation says. Problems with
// single messages (too large) are listed in the result's Errors and the
// poll goes on; an error that stops the poll is returned (and listed).
func (c *Conn) Poll(ctx context.Context, mb Mailbox, sink Sink, state State) (PollResult, error) {
	res := PollResult{Errors: []string{}}
	err := c.poll(ctx, mb, sink, state, &res)
	if err != nil {
		res.Errors = append(res.Errors, err.Error())
	}
	return res, err
}

func (c *Conn) poll(ctx context.Context, mb Mailbox, sink Sink, state State, res *PollResult) error {
	stop := c.watch(ctx)
	defer stop()
	t := c.opts.timeout()
	folder := c.acct.Folder
	c.deadline(t)
	sel, err := c.c.Select(folder, nil).Wait()
	if err != nil {
		return c.stepError("select "+folder, err)
	}
	validity, last, err := state.Load(mb.ID)
	if err != nil {
		return &Error{Step: "read state", Msg: err.Error(), Err: err}
	}
	if validity != sel.UIDValidity {
		// A new UIDVALIDITY: the old UIDs mean nothing, read from the start.
		// Reports already stored come back as duplicates.
		validity, last = sel.UIDValidity, 0
		if err := state.Save(mb.ID, validity, last, 0); err != nil {
			return &Error{Step: "save state", Msg: err.Error(), Err: err}
		}
	}
	if sel.NumMessages == 0 || (sel.UIDNext != 0 && uint32(sel.UIDNext) <= last+1) {
		return nil
	}
	c.deadline(t)
	var set imap.UIDSet
	set.AddRange(imap.UID(last+1), 0) // last+1:*
	found, err := c.c.UIDSearch(&imap.SearchCriteria{UID: []imap.UIDSet{set}}, nil).Wait()
	if err != nil {
		return c.stepError("search", err)
	}
	uids := slices.DeleteFunc(found.AllUIDs(), func(u imap.UID) bool { return uint32(u) <= last })
	slices.Sort(uids)
	var unmoved unmovedMail
	for _, uid := range uids {
		if err := ctx.Err(); err != nil {
			return err
		}
		imported, err := c.one(ctx, mb, uid, sink, res, &unmoved)
		if err != nil {
			return err
		}
		if err := state.Save(mb.ID, validity, uint32(uid), imported); err != nil {
			return &Error{Step: "save state", Msg: err.Error(), Err: err}
		}
	}
	return unmoved.err()
}

// unmovedMail gathers the mails whose move the server refused: their
// reports are stored and they stay in the folder, done, so that one mail
// the server will not move never holds up the others; the poll then ends
// with an error naming them (last_error).
type unmovedMail struct {
	n     int
	first *Error
}

func (u *unmovedMail) add(e *Error) {
	u.n++
	if u.first == nil {
		u.first = e
	}
}

func (u *unmovedMail) err() error {
	if u.n == 0 {
		return nil
	}
	return &Error{Step: u.first.Step, Err: u.first.Err, Msg: fmt.Sprintf("%s; %d message(s) with reports left in the folder (their reports are stored)", u.first.Msg, u.n)}
}

// one fetches, ingests and, when it held a report, moves one message. It
// returns 1 when the message held a report and is done (moved, or left in
// place when there is no archive folder or the server refused the move),
// for messages_imported.
func (c *Conn) one(ctx context.Context, mb Mailbox, uid imap.UID, sink Sink, res *PollResult, unmoved *unmovedMail) (int, error) {
	t := c.opts.timeout()
	c.deadline(t)
	sizes, err := c.c.Fetch(imap.UIDSetNum(uid), &imap.FetchOptions{UID: true, RFC822Size: true}).Collect()
	if err != nil {
		return 0, c.stepError("fetch", err)
	}
	if len(sizes) == 0 {
		return 0, nil // expunged meanwhile by someone else
	}
	size := sizes[0].RFC822Size
	if size > c.opts.maxBytes() {
		res.Errors = append(res.Errors, fmt.Sprintf("message UID %d is %d bytes, over the limit of %d: left in place", uid, size, c.opts.maxBytes()))
		return 0, nil
	}
	// A large message gets a second more for every MiB.
	c.deadline(t + time.Duration(size>>20)*time.Second)
	section := &imap.FetchItemBodySection{Peek: true}
	msgs, err := c.c.Fetch(imap.UIDSetNum(uid), &imap.FetchOptions{UID: true, BodySection: []*imap.FetchItemBodySection{section}}).Collect()
	if err != nil {
		return 0, c.stepError("fetch", err)
	}
	if len(msgs) == 0 {
		return 0, nil
	}
	raw := msgs[0].FindBodySection(section)
	if raw == nil {
		return 0, &Error{Step: "fetch", Msg: fmt.Sprintf("the server sent no body for UID %d", uid)}
	}
	res.Messages++
	out, err := sink.Ingest(ctx, mb.OrgID, raw)
	if err != nil {
		return 0, &Error{Step: "ingest", Msg: err.Error(), Err: err}
	}
	res.Aggregate += out.Aggregate
	res.Failure += out.Failure
	res.TLS += out.TLS
	res.Quarantined += out.Quarantined
	if !out.done() {
		res.NotReports++
		return 0, nil
	}
	if c.acct.ArchiveFolder != "" {
		if err := c.move(uid); err != nil {
			var e *Error
			if !errors.As(err, &e) || !refusedForGood(e.Err) {
				return 0, err // the connection, or a server that may agree later: retried
			}
			unmoved.add(e)
			res.Errors = append(res.Errors, fmt.Sprintf("message UID %d: %s; left in the folder, its reports stored", uid, e.Msg))
		}
	}
	res.Imported++
	return 1, nil
}

// refusedForGood reports whether err is the server refusing a command
// (a NO or BAD answer), not a broken connection nor a server busy for the
// moment (INUSE, UNAVAILABLE, SERVERBUG), so that trying again will not
// help.
func refusedForGood(err error) bool {
	var ie *imap.Error
	if !errors.As(err, &ie) {
		return false
	}
	switch ie.Code {
	case imap.ResponseCodeInUse, imap.ResponseCodeUnavailable, imap.ResponseCodeServerBug:
		return false
	}
	return ie.Type == imap.StatusResponseTypeNo || ie.Type == imap.StatusResponseTypeBad
}

// move takes message uid to the archive folder: MOVE where offered, else
// UID COPY, \Deleted and UID EXPUNGE of that message only (UIDPLUS). A
// server with neither gets the copy and the \Deleted flag, and no EXPUNGE
// that would also remove other messages a user marked deleted. The archive
// folder is created when missing. Its name is the server's (archiveName).
func (c *Conn) move(uid imap.UID) error {
	name, err := c.archiveName()
	if err != nil {
		return err
	}
	err = c.moveOnce(uid, name)
	var imapErr *imap.Error
	if errors.As(err, &imapErr) && (imapErr.Code == imap.ResponseCodeTryCreate || imapErr.Code == imap.ResponseCodeNonExistent) {
		if cerr := c.createFolder(name); cerr != nil {
			return c.stepError("create "+name, cerr)
		}
		err = c.moveOnce(uid, name)
	}
	if err != nil {
		return c.stepError("move to "+name, err)
	}
	return nil
}

func (c *Conn) moveOnce(uid imap.UID, folder string) error {
	c.deadline(c.opts.timeout())
	set := imap.UIDSetNum(uid)
	caps := c.caps
	if caps.Has(imap.CapMove) {
		_, err := c.c.Move(set, folder).Wait()
		return err
	}
	if _, err := c.c.Copy(set, folder).Wait(); err != nil {
		return err
	}
	flags := &imap.StoreFlags{Op: imap.StoreFlagsAdd, Silent: true, Flags: []imap.Flag{imap.FlagDeleted}}
	if err := c.c.Store(set, flags, nil).Close(); err != nil {
		return err
	}
	if caps.Has(imap.CapUIDPlus) {
		return c.c.UIDExpunge(set).Close()
	}
	return nil
}

// ServerFolderName returns folder as the server names it: the "/" that
// separates levels in dmarcd's folder names (the default archive folder
// is "Archive/dmarcd") becomes the server's hierarchy delimiter, delim,
// which LIST "" "" tells ("." for Dovecot's default Maildir++ layout and
// Courier, "/" for most others). A server with no hierarchy (delim 0)
// gets the name as it is.
func ServerFolderName(folder string, delim rune) string {
	if delim == 0 || delim == '/' {
		return folder
	}
	return strings.ReplaceAll(folder, "/", string(delim))
}

// archiveName is the archive folder's name on this server: the delimiter
// is asked once per connection.
func (c *Conn) archiveName() (string, error) {
	if !c.delimKnown {
		c.deadline(c.opts.timeout())
		list, err := c.c.List("", "", nil).Collect()
		if err != nil {
			return "", c.stepError(`list "" ""`, err)
		}
		if len(list) > 0 {
			c.delim = list[0].Delim
		}
		c.delimKnown = true
	}
	return ServerFolderName(c.acct.ArchiveFolder, c.delim), nil
}

// createFolder creates folder; one that exists already is no error.
func (c *Conn) createFolder(folder string) error {
	c.deadline(c.opts.timeout())
	err := c.c.Create(folder, nil).Wait()
	var ie *imap.Error
	if err != nil && errors.As(err, &ie) && ie.Code == imap.ResponseCodeAlreadyExists {
		return nil
	}
	return err
}

// stepArchive is the Step of an Error about the archive folder tried
// before a mailbox is saved.
const stepArchive = "archive folder"

// CheckArchiveFolder makes sure the archive folder exists on the server,
// creating it when it does not, under the server's name for it
// (ServerFolderName): what Check does before a mailbox with an archive
// folder is added or changed, so that a folder the server refuses is said
// then, in the server's words, not at every poll. An Error with Step
// "archive folder" when the server refuses it.
func (c *Conn) CheckArchiveFolder() error {
	if c.acct.ArchiveFolder == "" {
		return nil
	}
	name, err := c.archiveName()
	if err != nil {
		return err
	}
	c.deadline(c.opts.timeout())
	list, err := c.c.List("", name, nil).Collect()
	if err != nil {
		e := c.stepError(stepArchive, err)
		e.Msg = fmt.Sprintf("listing %q: %s", name, e.Msg)
		return e
	}
	for _, l := range list {
		if l.Mailbox == name && !slices.Contains(l.Attrs, imap.MailboxAttrNoSelect) && !slices.Contains(l.Attrs, imap.MailboxAttrNonExistent) {
			return nil
		}
	}
	if err := c.createFolder(name); err != nil {
		e := c.stepError(stepArchive, err)
		e.Msg = fmt.Sprintf("the server refused to create %q: %s", name, e.Msg)
		return e
	}
	return nil
}
