package cli

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"time"

	"github.com/dmarcd/dmarcd/admin"
	"github.com/dmarcd/dmarcd/store"
)

// openAdmin returns the admin service: the running server's socket when one
// answers, else the database file opened by this process. close releases it.
func (g *globalOptions) openAdmin(ctx context.Context) (svc admin.Service, close func(), err error) {
	if c, ok, err := g.dialAdmin(ctx); err != nil {
		return nil, nil, err
	} else if ok {
		return c, c.Close, nil
	}
	if err := g.requireDatabase(); err != nil {
		return nil, nil, err
	}
	db, err := g.openStore(false)
	if err != nil {
		return nil, nil, err
	}
	return &admin.Local{DB: db}, func() { db.Close() }, nil
}

// openStore opens the database file for a command run without a server.
func (g *globalOptions) openStore(readOnly bool) (*store.DB, error) {
	db, err := store.Open(g.dbPath(), &store.Options{Timeout: time.Second, ReadOnly: readOnly})
	if errors.Is(err, store.ErrLocked) {
		return nil, fmt.Errorf("the database %s is in use by another process and no dmarcd server answers on %s: "+
			"if 'dmarcd serve' is running, run this command as the same user (the socket is mode 0600); "+
			"otherwise stop the process holding the file", g.dbPath(), g.socketPath())
	}
	if errors.Is(err, fs.ErrPermission) {
		return nil, g.permissionHint(err)
	}
	return db, err
}
