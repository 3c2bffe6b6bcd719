//go:build race

package aggregate

// aggRace reports whether the race detector is on: it slows the reader
// some 15 times and adds its own memory, so the memory test skips itself.
const aggRace = true
