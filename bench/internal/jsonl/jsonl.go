// Package jsonl writes benchmark results as JSON lines, one object a line,
// so runs can be compared with jq or a spreadsheet.
package jsonl

import (
	"encoding/json"
	"os"
	"path/filepath"
)

// Write writes rows to path, creating its directory.
func Write[T any](path string, rows []T) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(f)
	for _, r := range rows {
		if err := enc.Encode(r); err != nil {
			f.Close()
			return err
		}
	}
	return f.Close()
}
