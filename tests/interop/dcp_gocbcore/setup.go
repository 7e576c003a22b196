// Setup helpers: targets, gocbcore logging, readiness.

package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/couchbase/gocbcore/v10"
	"github.com/couchbase/gocbcore/v10/memd"
)

func readTargets(path string) (map[uint16]uint64, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var raw map[string]uint64
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("%s: want a JSON object {\"vb\": seqno}: %w", path, err)
	}
	out := make(map[uint16]uint64, len(raw))
	for k, v := range raw {
		vb, err := strconv.ParseUint(k, 10, 16)
		if err != nil {
			return nil, fmt.Errorf("%s: bad vbucket id %q", path, k)
		}
		out[uint16(vb)] = v
	}
	return out, nil
}

func fetchTargets(agent *gocbcore.DCPAgent, deadline time.Time) (map[uint16]uint64, error) {
	type res struct {
		entries []gocbcore.VbSeqNoEntry
		err     error
	}
	ch := make(chan res, 1)
	_, err := agent.GetVbucketSeqnos(0, memd.VbucketStateActive, gocbcore.GetVbucketSeqnoOptions{},
		func(e []gocbcore.VbSeqNoEntry, err error) { ch <- res{e, err} })
	if err != nil {
		return nil, err
	}
	select {
	case r := <-ch:
		if r.err != nil {
			return nil, r.err
		}
		out := make(map[uint16]uint64, len(r.entries))
		for _, e := range r.entries {
			out[e.VbID] = uint64(e.SeqNo)
		}
		return out, nil
	case <-time.After(time.Until(deadline)):
		return nil, errors.New("GET_ALL_VB_SEQNOS: no answer before the timeout")
	}
}

func writeTargets(path string, t map[uint16]uint64) error {
	m := make(map[string]uint64, len(t))
	for vb, s := range t {
		m[strconv.Itoa(int(vb))] = s
	}
	data, err := json.Marshal(m)
	if err != nil {
		return err
	}
	return writeFileAtomic(path, append(data, '\n'))
}

// bootLogger keeps gocbcore's warnings (and everything with --verbose) so a failed
// bootstrap can be explained.
type bootLogger struct {
	mu      sync.Mutex
	verbose bool
	last    []string
}

func (l *bootLogger) Log(level gocbcore.LogLevel, offset int, format string, v ...interface{}) error {
	if level > gocbcore.LogDebug {
		return nil // per-packet tracing: too costly to format
	}
	msg := fmt.Sprintf(format, v...)
	if l.verbose {
		fmt.Fprintf(os.Stderr, "gocbcore: %s\n", msg)
	}
	if level <= gocbcore.LogWarn || strings.Contains(msg, "failed to bootstrap") ||
		strings.Contains(msg, "Failed to") {
		if len(msg) > 600 {
			msg = msg[:600] + "..."
		}
		l.mu.Lock()
		l.last = append(l.last, msg)
		if len(l.last) > 8 {
			l.last = l.last[len(l.last)-8:]
		}
		l.mu.Unlock()
	}
	return nil
}

func (l *bootLogger) recent() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.last, "\n  ")
}

func waitReady(agent *gocbcore.DCPAgent, deadline time.Time) error {
	ch := make(chan error, 1)
	_, err := agent.WaitUntilReady(deadline, gocbcore.WaitUntilReadyOptions{
		ServiceTypes: []gocbcore.ServiceType{gocbcore.MemdService},
	}, func(_ *gocbcore.WaitUntilReadyResult, err error) { ch <- err })
	if err != nil {
		return err
	}
	return <-ch
}
