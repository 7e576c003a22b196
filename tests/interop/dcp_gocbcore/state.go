// The resume state file: per vbucket the position to resume from.

package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

type failoverEntry struct {
	VbUUID uint64 `json:"vbuuid"`
	SeqNo  uint64 `json:"seqno"`
}

type vbState struct {
	Vb        uint16          `json:"vb"`
	VbUUID    uint64          `json:"vbuuid"`
	SeqNo     uint64          `json:"seqno"`
	SnapStart uint64          `json:"snap_start"`
	SnapEnd   uint64          `json:"snap_end"`
	Failover  []failoverEntry `json:"failover_log"`
}

type stateFile struct {
	Version  int        `json:"version"`
	Bucket   string     `json:"bucket"`
	Name     string     `json:"name"`
	Saved    string     `json:"saved"`
	VBuckets []*vbState `json:"vbuckets"`
}

func loadState(path string) (map[uint16]*vbState, bool, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return map[uint16]*vbState{}, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	var sf stateFile
	if err := json.Unmarshal(data, &sf); err != nil {
		return nil, false, fmt.Errorf("state file %s: %w", path, err)
	}
	out := make(map[uint16]*vbState, len(sf.VBuckets))
	for _, s := range sf.VBuckets {
		if s.SnapStart > s.SeqNo || s.SeqNo > s.SnapEnd {
			return nil, false, fmt.Errorf("state file %s: vb %d has seqno %d outside its snapshot %d..%d",
				path, s.Vb, s.SeqNo, s.SnapStart, s.SnapEnd)
		}
		out[s.Vb] = s
	}
	return out, true, nil
}

// writeFileAtomic writes data to a temp file in path's directory, fsyncs it and renames it
// over path: a reader (or a crash) sees either the old or the new content.
func writeFileAtomic(path string, data []byte) error {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	name := tmp.Name()
	if _, err = tmp.Write(data); err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(name, path)
	}
	if err != nil {
		_ = os.Remove(name)
	}
	return err
}
