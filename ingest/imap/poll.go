package imap

import (
	"context"
	"errors"
	"fmt"
	"slices"
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
		if err := state.Save(mb.ID, validity, last); err != nil {
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
	for _, uid := range uids {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := c.one(ctx, mb, uid, sink, res); err != nil {
			return err
		}
		if err := state.Save(mb.ID, validity, uint32(uid)); err != nil {
			return &Error{Step: "save state", Msg: err.Error(), Err: err}
		}
	}
	return nil
}

// one fetches, ingests and, when it held a report, moves one message.
func (c *Conn) one(ctx context.Context, mb Mailbox, uid imap.UID, sink Sink, res *PollResult) error {
	t := c.opts.timeout()
	c.deadline(t)
	sizes, err := c.c.Fetch(imap.UIDSetNum(uid), &imap.FetchOptions{UID: true, RFC822Size: true}).Collect()
	if err != nil {
		return c.stepError("fetch", err)
	}
	if len(sizes) == 0 {
		return nil // expunged meanwhile by someone else
	}
	size := sizes[0].RFC822Size
	if size > c.opts.maxBytes() {
		res.Errors = append(res.Errors, fmt.Sprintf("message UID %d is %d bytes, over the limit of %d: left in place", uid, size, c.opts.maxBytes()))
		return nil
	}
	// A large message gets a second more for every MiB.
	c.deadline(t + time.Duration(size>>20)*time.Second)
	section := &imap.FetchItemBodySection{Peek: true}
	msgs, err := c.c.Fetch(imap.UIDSetNum(uid), &imap.FetchOptions{UID: true, BodySection: []*imap.FetchItemBodySection{section}}).Collect()
	if err != nil {
		return c.stepError("fetch", err)
	}
	if len(msgs) == 0 {
		return nil
	}
	raw := msgs[0].FindBodySection(section)
	if raw == nil {
		return &Error{Step: "fetch", Msg: fmt.Sprintf("the server sent no body for UID %d", uid)}
	}
	res.Messages++
	out, err := sink.Ingest(ctx, mb.OrgID, raw)
	if err != nil {
		return &Error{Step: "ingest", Msg: err.Error(), Err: err}
	}
	res.Aggregate += out.Aggregate
	res.Failure += out.Failure
	res.TLS += out.TLS
	res.Quarantined += out.Quarantined
	if !out.done() {
		res.NotReports++
		return nil
	}
	res.Imported++
	if c.acct.ArchiveFolder == "" {
		return nil
	}
	return c.move(uid)
}

// move takes message uid to the archive folder: MOVE where offered, else
// UID COPY, \Deleted and UID EXPUNGE of that message only (UIDPLUS). A
// server with neither gets the copy and the \Deleted flag, and no EXPUNGE
// that would also remove other messages a user marked deleted. The archive
// folder is created when missing.
func (c *Conn) move(uid imap.UID) error {
	err := c.moveOnce(uid)
	var imapErr *imap.Error
	if errors.As(err, &imapErr) && (imapErr.Code == imap.ResponseCodeTryCreate || imapErr.Code == imap.ResponseCodeNonExistent) {
		c.deadline(c.opts.timeout())
		if cerr := c.c.Create(c.acct.ArchiveFolder, nil).Wait(); cerr != nil {
			var ce *imap.Error
			if !errors.As(cerr, &ce) || ce.Code != imap.ResponseCodeAlreadyExists {
				return c.stepError("create "+c.acct.ArchiveFolder, cerr)
			}
		}
		err = c.moveOnce(uid)
	}
	if err != nil {
		return c.stepError("move to "+c.acct.ArchiveFolder, err)
	}
	return nil
}

func (c *Conn) moveOnce(uid imap.UID) error {
	c.deadline(c.opts.timeout())
	set := imap.UIDSetNum(uid)
	caps := c.caps
	if caps.Has(imap.CapMove) {
		_, err := c.c.Move(set, c.acct.ArchiveFolder).Wait()
		return err
	}
	if _, err := c.c.Copy(set, c.acct.ArchiveFolder).Wait(); err != nil {
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
