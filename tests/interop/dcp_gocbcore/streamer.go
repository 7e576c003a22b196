// The streamer: per-vbucket bookkeeping, stream requests, rollbacks, saving.

package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sort"
	"sync"
	"time"

	"github.com/couchbase/gocbcore/v10"
)

type options struct {
	addr, bucket, user, password, name string
	statePath, eventsPath              string
	untilPath, seqnosOut               string
	stopAfter                          uint64
	timeout                            time.Duration
	expiryOpcode                       bool
	verbose                            bool
	maxRollbacks                       int
	// collections: negotiate collections (IoConfig.UseCollections); scope and collection
	// events are then expected and written, and mutations carry their collection id.
	collections bool
	// filterCollection: with collections, stream only this collection (a stream filter).
	filterCollection int64
}

// per-run bookkeeping of one vbucket (not saved)
type vbRun struct {
	target    uint64
	streaming bool // a stream request is outstanding or a stream is open
	done      bool
	rollbacks int
	// the snapshot marker the next items belong to; valid once haveMarker
	haveMarker    bool
	markStart     uint64
	markEnd       uint64
	itemsInMarker uint64
	endedOK       bool
}

type streamer struct {
	opts  options
	agent *gocbcore.DCPAgent

	mu       sync.Mutex
	events   *bufio.Writer
	state    map[uint16]*vbState
	runs     map[uint16]*vbRun
	stopped  bool // no more events are recorded once set
	resumed  bool
	items    uint64
	counts   map[string]uint64
	rollback uint64
	reopens  uint64
	short    uint64
	viol     uint64
	notDone  int
	openVbs  int // streams outstanding or open

	reopenCh   chan uint16
	fatalCh    chan error
	stopCh     chan string
	stopOnce   sync.Once
	doneCh     chan struct{}
	doneOnce   sync.Once
	endsDoneCh chan struct{}
}

func logf(format string, a ...interface{}) {
	fmt.Fprintf(os.Stderr, "dcpstream: "+format+"\n", a...)
}

// streamOptions: a filter of one collection when asked for.
func (s *streamer) streamOptions() gocbcore.OpenStreamOptions {
	if s.opts.filterCollection < 0 {
		return gocbcore.OpenStreamOptions{}
	}
	return gocbcore.OpenStreamOptions{FilterOptions: &gocbcore.OpenStreamFilterOptions{
		CollectionIDs: []uint32{uint32(s.opts.filterCollection)}}}
}

func (s *streamer) writeEventLocked(v interface{}) {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	b = append(b, '\n')
	if _, err := s.events.Write(b); err != nil {
		s.fatal(fmt.Errorf("writing events file: %w", err))
	}
}

func (s *streamer) fatal(err error) {
	select {
	case s.fatalCh <- err:
	default:
	}
}

func (s *streamer) requestStop(reason string) {
	s.stopOnce.Do(func() { s.stopCh <- reason })
}

func (s *streamer) stateFor(vb uint16) *vbState {
	st := s.state[vb]
	if st == nil {
		st = &vbState{Vb: vb}
		s.state[vb] = st
	}
	return st
}

// markDoneLocked marks a vbucket finished (target reached or stream ended OK).
func (s *streamer) markDoneLocked(vb uint16, r *vbRun) {
	if r.done {
		return
	}
	r.done = true
	s.notDone--
	if s.notDone == 0 {
		s.doneOnce.Do(func() { close(s.doneCh) })
	}
}

func (s *streamer) streamClosedLocked(r *vbRun) {
	if r.streaming {
		r.streaming = false
		s.openVbs--
		if s.openVbs == 0 && s.notDone == 0 {
			select {
			case s.endsDoneCh <- struct{}{}:
			default:
			}
		}
	}
}

// saveLocked flushes the events file, then writes the state file atomically.
func (s *streamer) saveLocked() error {
	if err := s.events.Flush(); err != nil {
		return fmt.Errorf("flushing events file: %w", err)
	}
	sf := stateFile{Version: 1, Bucket: s.opts.bucket, Name: s.opts.name,
		Saved: time.Now().UTC().Format(time.RFC3339Nano)}
	vbs := make([]int, 0, len(s.state))
	for vb := range s.state {
		vbs = append(vbs, int(vb))
	}
	sort.Ints(vbs)
	for _, vb := range vbs {
		cp := *s.state[uint16(vb)]
		cp.Failover = append([]failoverEntry(nil), cp.Failover...)
		sf.VBuckets = append(sf.VBuckets, &cp)
	}
	data, err := json.MarshalIndent(&sf, "", " ")
	if err != nil {
		return err
	}
	return writeFileAtomic(s.opts.statePath, append(data, '\n'))
}

func (s *streamer) save() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.saveLocked()
}

// isFatalOpenError: stream-request errors that retrying cannot fix.
func isFatalOpenError(err error) bool {
	for _, e := range []error{gocbcore.ErrMemdNotSupported, gocbcore.ErrMemdInvalidArgs,
		gocbcore.ErrMemdRangeError, gocbcore.ErrMemdAccessError, gocbcore.ErrMemdUnknownCommand,
		gocbcore.ErrMemdAuthError, gocbcore.ErrFeatureNotAvailable, gocbcore.ErrAuthenticationFailure,
		gocbcore.ErrInvalidArgument} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// truncateLocked applies a ROLLBACK to seqno `to` (protocol.md §4.3): drop what is above it,
// keep the failover entries at or below it, and resume as a complete snapshot at `to`.
func (s *streamer) truncateLocked(st *vbState, to uint64) {
	keep := st.Failover[:0]
	for _, e := range st.Failover {
		if e.SeqNo <= to {
			keep = append(keep, e)
		}
	}
	st.Failover = keep
	st.VbUUID = 0
	if len(keep) > 0 {
		st.VbUUID = keep[0].VbUUID // newest entry that covers `to`
	}
	st.SeqNo, st.SnapStart, st.SnapEnd = to, to, to
}

func (s *streamer) openStream(vb uint16) {
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		return
	}
	r := s.runs[vb]
	st := s.stateFor(vb)
	if r.done || r.streaming {
		s.mu.Unlock()
		return
	}
	r.streaming = true
	s.openVbs++
	r.haveMarker = false
	uuid, start, snapStart, snapEnd := st.VbUUID, st.SeqNo, st.SnapStart, st.SnapEnd
	// end >= start always: a client at or past its target (possible only on another branch,
	// see planStreams) asks with end = start, which makes the producer decide on a rollback.
	end := r.target
	if end < start {
		end = start
	}
	s.mu.Unlock()

	cb := func(entries []gocbcore.FailoverEntry, err error) {
		s.onOpen(vb, start, end, uuid, snapStart, snapEnd, entries, err)
	}
	_, err := s.agent.OpenStream(vb, 0, gocbcore.VbUUID(uuid), gocbcore.SeqNo(start), gocbcore.SeqNo(end),
		gocbcore.SeqNo(snapStart), gocbcore.SeqNo(snapEnd), observer{s}, s.streamOptions(), cb)
	if err != nil {
		cb(nil, err)
	}
}

func (s *streamer) onOpen(vb uint16, start, end, uuid, snapStart, snapEnd uint64,
	entries []gocbcore.FailoverEntry, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.runs[vb]
	st := s.stateFor(vb)
	if err == nil {
		if s.stopped {
			return
		}
		ev := openEvent{Type: "open", Vb: vb, Start: start, End: end, VbUUID: uuid,
			SnapStart: snapStart, SnapEnd: snapEnd, Failover: [][2]uint64{}}
		fl := make([]failoverEntry, 0, len(entries))
		for _, e := range entries {
			fl = append(fl, failoverEntry{uint64(e.VbUUID), uint64(e.SeqNo)})
			ev.Failover = append(ev.Failover, [2]uint64{uint64(e.VbUUID), uint64(e.SeqNo)})
		}
		if len(fl) == 0 {
			logf("vb %d: stream request succeeded with an empty failover log", vb)
			s.viol++
		} else {
			st.Failover = fl
			st.VbUUID = fl[0].VbUUID // the newest entry
		}
		s.writeEventLocked(ev)
		if start >= r.target {
			// Only asked whether the history is shared (it is): nothing to stream.
			s.markDoneLocked(vb, r)
		}
		return
	}
	s.streamClosedLocked(r)
	if s.stopped {
		return
	}
	var rb gocbcore.DCPRollbackError
	if errors.As(err, &rb) {
		to := uint64(rb.SeqNo)
		r.rollbacks++
		s.rollback++
		logf("vb %d: ROLLBACK to seqno %d (client had seqno %d, snapshot %d..%d, vbuuid %d)",
			vb, to, st.SeqNo, st.SnapStart, st.SnapEnd, st.VbUUID)
		s.writeEventLocked(rollbackEvent{"rollback", vb, to, st.SeqNo, st.SnapStart, st.SnapEnd, st.VbUUID})
		if to > st.SeqNo {
			s.fatal(fmt.Errorf("vb %d: rollback to seqno %d, above the client's seqno %d", vb, to, st.SeqNo))
			return
		}
		if r.rollbacks > s.opts.maxRollbacks {
			s.fatal(fmt.Errorf("vb %d: %d rollbacks in a row", vb, r.rollbacks))
			return
		}
		s.truncateLocked(st, to)
		if to >= r.target {
			s.markDoneLocked(vb, r) // the shared history already reaches the target
			return
		}
		go func() { s.reopenCh <- vb }()
		return
	}
	if isFatalOpenError(err) {
		s.fatal(fmt.Errorf("vb %d: stream request (start %d, end %d, vbuuid %d, snapshot %d..%d) failed: %w",
			vb, start, end, uuid, snapStart, snapEnd, err))
		return
	}
	logf("vb %d: stream request failed (%v); retrying", vb, err)
	s.reopens++
	go func() {
		time.Sleep(time.Second)
		s.reopenCh <- vb
	}()
}

// planStreams decides which vbuckets to stream (and registers them in s.runs):
//   - target > saved seqno: stream from the saved position up to the target;
//   - target 0 and nothing saved: nothing to do;
//   - target <= saved seqno (> 0): up to date if the client is still on the producer's
//     current branch (its vbuuid is the newest entry of DCP_GET_FAILOVER_LOG). Otherwise the
//     producer lost history the client holds (e.g. an unclean restart): the stream request
//     is sent anyway, with end = start, so that the producer answers ROLLBACK if needed.
func (s *streamer) planStreams(targets map[uint16]uint64, deadline time.Time) []uint16 {
	var toOpen, check []uint16
	for vb, t := range targets {
		have := uint64(0)
		if st := s.state[vb]; st != nil {
			have = st.SeqNo
		}
		switch {
		case t > have:
			toOpen = append(toOpen, vb)
		case have == 0:
		default:
			check = append(check, vb)
		}
	}
	type flRes struct {
		vb      uint16
		entries []gocbcore.FailoverEntry
		err     error
	}
	ch := make(chan flRes, len(check))
	for _, vb := range check {
		vb := vb
		_, err := s.agent.GetFailoverLog(vb, func(e []gocbcore.FailoverEntry, err error) { ch <- flRes{vb, e, err} })
		if err != nil {
			ch <- flRes{vb, nil, err}
		}
	}
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	for range check {
		var r flRes
		select {
		case r = <-ch:
		case <-timer.C:
			logf("DCP_GET_FAILOVER_LOG: no answer before the timeout")
			return toOpen // the caller times out too
		}
		st := s.state[r.vb]
		switch {
		case r.err != nil:
			logf("vb %d: DCP_GET_FAILOVER_LOG failed (%v); asking with a stream request", r.vb, r.err)
			toOpen = append(toOpen, r.vb)
		case len(r.entries) > 0 && uint64(r.entries[0].VbUUID) == st.VbUUID:
			// same branch, up to date
		default:
			newest := uint64(0)
			if len(r.entries) > 0 {
				newest = uint64(r.entries[0].VbUUID)
			}
			logf("vb %d: at seqno %d (target %d) but on vbuuid %d, the producer's newest is %d: asking with a stream request",
				r.vb, st.SeqNo, targets[r.vb], st.VbUUID, newest)
			toOpen = append(toOpen, r.vb)
		}
	}
	sort.Slice(toOpen, func(i, j int) bool { return toOpen[i] < toOpen[j] })
	for _, vb := range toOpen {
		s.runs[vb] = &vbRun{target: targets[vb]}
	}
	return toOpen
}
