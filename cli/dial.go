package cli

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"strconv"
	"syscall"

	"github.com/dmarcd/dmarcd/admin"
)

// dialAdmin connects to the running server's admin socket. ok is false
// when no server answers (the caller then opens the file). A socket this
// user may not use is an error saying what to do: a server runs, and the
// command must run as its user.
func (g *globalOptions) dialAdmin(ctx context.Context) (c *admin.Client, ok bool, err error) {
	c, err = admin.Dial(ctx, g.socketPath())
	if err == nil {
		return c, true, nil
	}
	if errors.Is(err, fs.ErrPermission) {
		return nil, false, g.permissionHint(err)
	}
	return nil, false, nil
}

// permissionHint explains a permission error on the data directory, its
// socket or its database: they belong to the server's user.
func (g *globalOptions) permissionHint(err error) error {
	owner := ownerOf(g.DataDir)
	who := "the user the server runs as"
	sudo := "sudo -u USER dmarcd ..."
	if owner != "" {
		who = "the user " + owner
		sudo = "sudo -u " + owner + " " + commandName() + " ..."
	}
	return fmt.Errorf("permission denied on %s: a dmarcd server may be running there, and its admin socket and database "+
		"(mode 0600) are for %s only; run this command as that user (%s) (%w)", g.DataDir, who, sudo, err)
}

// ownerOf is the name (else the uid) of the owner of path, or "".
func ownerOf(path string) string {
	fi, err := os.Stat(path)
	if err != nil {
		return ""
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return ""
	}
	uid := strconv.FormatUint(uint64(st.Uid), 10)
	if u, err := user.LookupId(uid); err == nil {
		return u.Username
	}
	return uid
}
