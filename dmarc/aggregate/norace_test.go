//go:build !race

package aggregate

// aggRace reports whether the race detector is on (see aggregate_race_test.go).
const aggRace = false
