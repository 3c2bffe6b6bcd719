package cli

import (
	"os"

	"golang.org/x/term"
)

// isTerminal reports whether w (a reader or writer) is a terminal. A character device that is no
// terminal (/dev/null) is not one: what is shown only once must not vanish
// there.
func isTerminal(w any) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}
