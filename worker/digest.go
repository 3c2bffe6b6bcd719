package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/dmarcd/dmarcd/digest"
	"github.com/dmarcd/dmarcd/mailout"
	"github.com/dmarcd/dmarcd/store"
)

// Digest mail defaults.
const (
	// DefaultDigestSendAt is when, after 00:00 UTC, the digest of the day
	// (and on Mondays of the week) that ended is due: reporters send a
	// day's reports in the hours after it ends.
	DefaultDigestSendAt = 6 * time.Hour
	// DefaultDigestEvery is how often the job looks for due digests.
	DefaultDigestEvery = 10 * time.Minute
	// DefaultDigestMarkerKeep is how long the marker of a queued digest is
	// kept: longer than any period a run can still send.
	DefaultDigestMarkerKeep = 60 * 24 * time.Hour
)

// DigestMail is the job that queues the daily and weekly digests: for
// every recipient of an organization's notification settings whose
// digest frequency is daily or weekly, the digest of the last complete
// period at now - SendAt (so the day's digest from 06:00 UTC the day
// after, the week's from 06:00 UTC on Monday), once: the store writes a
// marker per organization, recipient and period in the transaction that
// queues the mail (store.DB.QueueDigest), so a restart neither skips a
// digest (the next run finds it due) nor doubles one. A server down for
// a whole period sends only the last period's digest, not each one it
// missed.
type DigestMail struct {
	Store   *store.DB
	Builder *digest.Builder
	// PublicURL is the base of the links and of each recipient's
	// List-Unsubscribe (--public-url, no trailing slash); "" for none.
	PublicURL string
	// SendAt is the time after 00:00 UTC from which a period's digest is
	// due; 0 means DefaultDigestSendAt.
	SendAt time.Duration
	// Every is the job's interval; 0 means DefaultDigestEvery.
	Every time.Duration
	Log   *slog.Logger // nil discards
}

func (j *DigestMail) log() *slog.Logger {
	if j.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return j.Log
}

// Job returns the job to give the Scheduler.
func (j *DigestMail) Job() Job {
	every := j.Every
	if every <= 0 {
		every = DefaultDigestEvery
	}
	return Job{Name: "digest-mail", Every: every, AtStart: true, Run: j.Run}
}

// dueAt is the time whose last complete period is due at now.
func (j *DigestMail) dueAt(now time.Time) time.Time {
	at := j.SendAt
	if at <= 0 {
		at = DefaultDigestSendAt
	}
	return now.Add(-at)
}

// Run queues every digest due at now and not queued yet. A digest that
// cannot be built is logged and tried again at the next run; only a store
// failure is an error.
func (j *DigestMail) Run(ctx context.Context, now time.Time) error {
	due := j.dueAt(now)
	type orgRecipients struct {
		orgID string
		list  map[digest.Period][]string
	}
	var todo []orgRecipients
	err := j.Store.AllNotificationSettings(func(s *store.NotificationSettings) error {
		o := orgRecipients{orgID: s.OrgID, list: map[digest.Period][]string{}}
		for _, r := range s.Recipients {
			switch r.Digest {
			case store.DigestDaily:
				o.list[digest.Day] = append(o.list[digest.Day], r.Email)
			case store.DigestWeekly:
				o.list[digest.Week] = append(o.list[digest.Week], r.Email)
			}
		}
		if len(o.list) > 0 {
			todo = append(todo, o)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("worker: digest mail: %w", err)
	}
	for _, o := range todo {
		for _, p := range []digest.Period{digest.Day, digest.Week} {
			if ctx.Err() != nil {
				return nil
			}
			if err := j.queue(ctx, o.orgID, p, o.list[p], due); err != nil {
				return err
			}
		}
	}
	_, err = j.Store.PruneDigestMarkers(now.Add(-DefaultDigestMarkerKeep))
	return err
}

// queue queues the digest of organization orgID for period p at due to
// every recipient in emails that has not had it.
func (j *DigestMail) queue(ctx context.Context, orgID string, p digest.Period, emails []string, due time.Time) error {
	from, _ := p.Bounds(due)
	key := p.Key(from)
	var left []string
	for _, e := range emails {
		done, err := j.Store.DigestQueued(orgID, e, key)
		if err != nil {
			return fmt.Errorf("worker: digest mail: %w", err)
		}
		if !done {
			left = append(left, e)
		}
	}
	if len(left) == 0 {
		return nil
	}
	d, err := j.Builder.Build(ctx, orgID, p, due)
	if err != nil {
		if ctx.Err() == nil {
			j.log().Warn("digest not built", "org_id", orgID, "period", key, "error", err)
		}
		return nil
	}
	for _, e := range left {
		o := digest.RenderOptions{PublicURL: j.PublicURL}
		if j.PublicURL != "" {
			o.SettingsURL = mailout.SettingsURL(j.PublicURL, e)
		}
		m, err := digest.Render(d, o)
		if err != nil {
			j.log().Warn("digest not rendered", "org_id", orgID, "period", key, "error", err)
			return nil
		}
		st, err := j.Store.QueueDigest(key, &store.OutgoingMail{OrgID: orgID, Kind: store.MailKindDigest, To: e,
			Subject: m.Subject, Text: m.Text, HTML: m.HTML, ListUnsubscribe: o.SettingsURL,
			Headers: map[string]string{"X-Dmarcd-Digest": key}})
		switch {
		case errors.Is(err, store.ErrInvalid):
			j.log().Warn("digest not queued", "org_id", orgID, "period", key, "error", err)
		case err != nil:
			return fmt.Errorf("worker: digest mail: %w", err)
		case st != nil:
			j.log().Info("digest queued", "org_id", orgID, "period", key, "mail_id", st.ID)
		}
	}
	return nil
}
