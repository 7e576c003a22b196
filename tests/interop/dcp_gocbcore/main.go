// Command dcpstream streams every change of a bucket over DCP with gocbcore's DCP agent
// (github.com/couchbase/gocbcore/v10 v10.8.1, the client Couchbase's own Go tools use) and
// writes what it receives to a JSON-lines file, so an interop test can check a DCP producer
// with a client written by others. It can stop part-way and resume from a saved state.
//
//	dcpstream --addr 127.0.0.1:11210 --bucket default --user Administrator --password password \
//	          --state state.json --events events.jsonl [--stop-after-items N] \
//	          [--until-seqnos seqnos.json] [--timeout 120]
//
// State file (--state): per vbucket the newest vbuuid, the last seqno written to the events
// file, the snapshot range holding it and the failover log the producer last returned. If
// the file exists the streams resume from it (STREAM_REQ start = seqno with that uuid and
// snapshot range); otherwise they start at 0 with uuid 0. It is rewritten atomically (temp
// file + rename) every second and at exit, always after the events file has been flushed,
// so the state never claims a seqno the events file does not hold.
//
// Events file (--events), appended, one JSON object per line:
//
//	{"type":"start","pid":..,"resumed":bool,"vbuckets":M}          once per run
//	{"type":"open","vb":..,"start":..,"end":..,"vbuuid":..,"snap_start":..,"snap_end":..,
//	 "failover":[[uuid,seqno],..]}                                 a stream request succeeded
//	{"type":"snapshot","vb":..,"start":..,"end":..,"flags":..}
//	{"type":"mutation","vb":..,"seqno":..,"key":..,"rev":..,"cas":..,"flags":..,"expiry":..,
//	 "datatype":..,"value":"..." | "value_b64":".."}
//	{"type":"deletion"|"expiration","vb":..,"seqno":..,"key":..,"rev":..,"cas":..}
//	{"type":"end","vb":..,"reason":"ok"|"closed"|"state_changed"|..}
//	{"type":"rollback","vb":..,"to":..,"from":..,"snap_start":..,"snap_end":..,"vbuuid":..}
//	{"type":"stop","reason":"items"|"complete"|"timeout"|"signal"|"fatal"}
//
// Streams end by themselves: the end seqno of every stream request is the vbucket's target
// (--until-seqnos, a JSON object {"vb": high_seqno} as GET_ALL_VB_SEQNOS reports; without it
// the current high seqnos are fetched with GET_ALL_VB_SEQNOS first). A vbucket whose target
// is 0 or not above the resumed seqno is not streamed. The program exits 0 when every
// vbucket reached its target (or --stop-after-items items were received in this run) and
// prints one JSON line to stdout: {"items":N,"vbuckets":M,"rollbacks":R,...}.
// Exit codes: 0 ok, 1 usage/setup error, 2 timeout, 3 fatal stream error, 4 ordering
// violations seen in the stream, 130 interrupted.
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/couchbase/gocbcore/v10"
	"github.com/couchbase/gocbcore/v10/memd"
)

// ------------------------------------------------------------------ state file

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

// ------------------------------------------------------------------ events

type openEvent struct {
	Type      string      `json:"type"`
	Vb        uint16      `json:"vb"`
	Start     uint64      `json:"start"`
	End       uint64      `json:"end"`
	VbUUID    uint64      `json:"vbuuid"`
	SnapStart uint64      `json:"snap_start"`
	SnapEnd   uint64      `json:"snap_end"`
	Failover  [][2]uint64 `json:"failover"`
}

type snapshotEvent struct {
	Type  string `json:"type"`
	Vb    uint16 `json:"vb"`
	Start uint64 `json:"start"`
	End   uint64 `json:"end"`
	Flags uint32 `json:"flags"`
}

type itemEvent struct {
	Type     string  `json:"type"`
	Vb       uint16  `json:"vb"`
	SeqNo    uint64  `json:"seqno"`
	Key      string  `json:"key"`
	Rev      uint64  `json:"rev"`
	Cas      uint64  `json:"cas"`
	Flags    *uint32 `json:"flags,omitempty"`
	Expiry   *uint32 `json:"expiry,omitempty"`
	Datatype *uint8  `json:"datatype,omitempty"`
	Value    *string `json:"value,omitempty"`
	ValueB64 []byte  `json:"value_b64,omitempty"`
}

type endEvent struct {
	Type   string `json:"type"`
	Vb     uint16 `json:"vb"`
	Reason string `json:"reason"`
}

type rollbackEvent struct {
	Type      string `json:"type"`
	Vb        uint16 `json:"vb"`
	To        uint64 `json:"to"`
	From      uint64 `json:"from"`
	SnapStart uint64 `json:"snap_start"`
	SnapEnd   uint64 `json:"snap_end"`
	VbUUID    uint64 `json:"vbuuid"`
}

// ------------------------------------------------------------------ the streamer

type options struct {
	addr, bucket, user, password, name string
	statePath, eventsPath              string
	untilPath, seqnosOut               string
	stopAfter                          uint64
	timeout                            time.Duration
	expiryOpcode                       bool
	verbose                            bool
	maxRollbacks                       int
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

// ------------------------------------------------------------------ StreamObserver
// gocbcore calls these from one goroutine per connection (its DCP queue), in stream order.

type observer struct{ s *streamer }

func (o observer) SnapshotMarker(m gocbcore.DcpSnapshotMarker) {
	s := o.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return
	}
	r := s.runs[m.VbID]
	if r == nil {
		logf("vb %d: snapshot marker for a vbucket not being streamed", m.VbID)
		s.viol++
		return
	}
	st := s.stateFor(m.VbID)
	if r.haveMarker {
		// The previous snapshot is complete: every item of it was written, so the client
		// holds a consistent state at its last seqno. Resume as "complete snapshot".
		st.SnapStart, st.SnapEnd = st.SeqNo, st.SeqNo
	}
	if m.StartSeqNo > m.EndSeqNo {
		logf("vb %d: snapshot marker start %d > end %d", m.VbID, m.StartSeqNo, m.EndSeqNo)
		s.viol++
	}
	if m.EndSeqNo <= st.SeqNo && st.SeqNo > 0 {
		logf("vb %d: snapshot marker %d..%d ends at or before the last seqno received (%d)",
			m.VbID, m.StartSeqNo, m.EndSeqNo, st.SeqNo)
		s.viol++
	}
	r.haveMarker = true
	r.markStart, r.markEnd = m.StartSeqNo, m.EndSeqNo
	r.itemsInMarker = 0
	s.counts["snapshot"]++
	s.writeEventLocked(snapshotEvent{"snapshot", m.VbID, m.StartSeqNo, m.EndSeqNo, uint32(m.SnapshotType)})
}

// itemLocked records one mutation/deletion/expiration.
func (s *streamer) itemLocked(kind string, vb uint16, seqno uint64, ev *itemEvent) {
	if s.stopped {
		return
	}
	r := s.runs[vb]
	if r == nil {
		logf("vb %d: %s seqno %d for a vbucket not being streamed", vb, kind, seqno)
		s.viol++
		return
	}
	st := s.stateFor(vb)
	if !r.haveMarker {
		logf("vb %d: %s seqno %d before any snapshot marker", vb, kind, seqno)
		s.viol++
	} else if seqno < r.markStart || seqno > r.markEnd {
		logf("vb %d: %s seqno %d outside its snapshot %d..%d", vb, kind, seqno, r.markStart, r.markEnd)
		s.viol++
	}
	if seqno <= st.SeqNo {
		logf("vb %d: %s seqno %d not above the last seqno received (%d)", vb, kind, seqno, st.SeqNo)
		s.viol++
	}
	s.writeEventLocked(ev)
	if seqno > st.SeqNo {
		st.SeqNo = seqno
		if r.haveMarker && seqno >= r.markStart && seqno <= r.markEnd {
			st.SnapStart, st.SnapEnd = r.markStart, r.markEnd
		} else {
			st.SnapStart, st.SnapEnd = seqno, seqno
		}
	}
	r.itemsInMarker++
	s.items++
	s.counts[kind]++
	if r.target > 0 && st.SeqNo >= r.target {
		s.markDoneLocked(vb, r)
	}
	if s.opts.stopAfter > 0 && s.items >= s.opts.stopAfter {
		s.stopped = true
		s.requestStop("items")
	}
}

func (o observer) Mutation(m gocbcore.DcpMutation) {
	flags, expiry, dt := m.Flags, m.Expiry, m.Datatype
	ev := &itemEvent{Type: "mutation", Vb: m.VbID, SeqNo: m.SeqNo, Key: string(m.Key), Rev: m.RevNo,
		Cas: m.Cas, Flags: &flags, Expiry: &expiry, Datatype: &dt}
	if utf8.Valid(m.Value) {
		v := string(m.Value)
		ev.Value = &v
	} else {
		ev.ValueB64 = append([]byte(nil), m.Value...)
	}
	o.s.mu.Lock()
	defer o.s.mu.Unlock()
	o.s.itemLocked("mutation", m.VbID, m.SeqNo, ev)
}

func (o observer) Deletion(d gocbcore.DcpDeletion) {
	ev := &itemEvent{Type: "deletion", Vb: d.VbID, SeqNo: d.SeqNo, Key: string(d.Key), Rev: d.RevNo, Cas: d.Cas}
	o.s.mu.Lock()
	defer o.s.mu.Unlock()
	o.s.itemLocked("deletion", d.VbID, d.SeqNo, ev)
}

func (o observer) Expiration(e gocbcore.DcpExpiration) {
	ev := &itemEvent{Type: "expiration", Vb: e.VbID, SeqNo: e.SeqNo, Key: string(e.Key), Rev: e.RevNo, Cas: e.Cas}
	o.s.mu.Lock()
	defer o.s.mu.Unlock()
	o.s.itemLocked("expiration", e.VbID, e.SeqNo, ev)
}

func endReason(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, gocbcore.ErrDCPStreamClosed):
		return "closed"
	case errors.Is(err, gocbcore.ErrDCPStreamStateChanged):
		return "state_changed"
	case errors.Is(err, gocbcore.ErrDCPStreamDisconnected):
		return "disconnected"
	case errors.Is(err, gocbcore.ErrDCPStreamTooSlow):
		return "too_slow"
	case errors.Is(err, gocbcore.ErrDCPBackfillFailed):
		return "backfill_failed"
	case errors.Is(err, gocbcore.ErrDCPStreamFilterEmpty):
		return "filter_empty"
	}
	// e.g. "unknown stream close reason (6)" (rollback) or a connection error
	return err.Error()
}

func (o observer) End(e gocbcore.DcpStreamEnd, err error) {
	s := o.s
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.runs[e.VbID]
	if r == nil {
		return
	}
	s.streamClosedLocked(r)
	if s.stopped {
		return
	}
	reason := endReason(err)
	s.counts["end"]++
	s.writeEventLocked(endEvent{"end", e.VbID, reason})
	st := s.stateFor(e.VbID)
	if err == nil {
		// STREAM_END OK: the end seqno was reached, the last snapshot is complete.
		if r.haveMarker {
			st.SnapStart, st.SnapEnd = st.SeqNo, st.SeqNo
		}
		r.endedOK = true
		if r.target > 0 && st.SeqNo < r.target {
			logf("vb %d: stream ended OK at seqno %d, below its target %d", e.VbID, st.SeqNo, r.target)
			s.short++
		}
		s.markDoneLocked(e.VbID, r)
		return
	}
	if r.done {
		return
	}
	logf("vb %d: stream ended (%s) at seqno %d before its target %d; reopening", e.VbID, reason, st.SeqNo, r.target)
	s.reopens++
	go func(vb uint16) {
		time.Sleep(500 * time.Millisecond)
		s.reopenCh <- vb
	}(e.VbID)
}

func (o observer) CreateCollection(c gocbcore.DcpCollectionCreation) {
	o.s.systemEvent("create_collection", c.VbID, c.SeqNo)
}
func (o observer) DeleteCollection(c gocbcore.DcpCollectionDeletion) {
	o.s.systemEvent("delete_collection", c.VbID, c.SeqNo)
}
func (o observer) FlushCollection(c gocbcore.DcpCollectionFlush) {
	o.s.systemEvent("flush_collection", c.VbID, c.SeqNo)
}
func (o observer) CreateScope(c gocbcore.DcpScopeCreation) {
	o.s.systemEvent("create_scope", c.VbID, c.SeqNo)
}
func (o observer) DeleteScope(c gocbcore.DcpScopeDeletion) {
	o.s.systemEvent("delete_scope", c.VbID, c.SeqNo)
}
func (o observer) ModifyCollection(c gocbcore.DcpCollectionModification) {
	o.s.systemEvent("modify_collection", c.VbID, c.SeqNo)
}

func (o observer) OSOSnapshot(snap gocbcore.DcpOSOSnapshot) {
	// Not negotiated (UseOSOBackfill is off): a producer must not send it.
	o.s.unexpected("oso_snapshot", snap.VbID, 0)
}

func (o observer) SeqNoAdvanced(a gocbcore.DcpSeqNoAdvanced) {
	// Only for collection-aware or filtered streams, which this client does not open.
	o.s.unexpected("seqno_advanced", a.VbID, a.SeqNo)
}

// systemEvent: collection/scope events are only sent to collection-aware connections;
// this one did not negotiate collections, so any of them is a producer error.
func (s *streamer) systemEvent(kind string, vb uint16, seqno uint64) {
	s.unexpected(kind, vb, seqno)
}

func (s *streamer) unexpected(kind string, vb uint16, seqno uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return
	}
	logf("vb %d: unexpected %s (seqno %d) on a connection without collections/OSO", vb, kind, seqno)
	s.viol++
	s.writeEventLocked(map[string]interface{}{"type": kind, "vb": vb, "seqno": seqno})
}

// ------------------------------------------------------------------ stream requests

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
	uuid, start, snapStart, snapEnd, end := st.VbUUID, st.SeqNo, st.SnapStart, st.SnapEnd, r.target
	s.mu.Unlock()

	cb := func(entries []gocbcore.FailoverEntry, err error) {
		s.onOpen(vb, start, end, uuid, snapStart, snapEnd, entries, err)
	}
	_, err := s.agent.OpenStream(vb, 0, gocbcore.VbUUID(uuid), gocbcore.SeqNo(start), gocbcore.SeqNo(end),
		gocbcore.SeqNo(snapStart), gocbcore.SeqNo(snapEnd), observer{s}, gocbcore.OpenStreamOptions{}, cb)
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

// ------------------------------------------------------------------ setup helpers

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

// ------------------------------------------------------------------ main

func main() {
	os.Exit(run())
}

func run() int {
	var o options
	var timeoutS float64
	fs := flag.NewFlagSet("dcpstream", flag.ContinueOnError)
	fs.StringVar(&o.addr, "addr", "127.0.0.1:11210", "KV address host:port of the seed node")
	fs.StringVar(&o.bucket, "bucket", "default", "bucket name")
	fs.StringVar(&o.user, "user", "Administrator", "user name (SASL SCRAM)")
	fs.StringVar(&o.password, "password", "password", "password")
	fs.StringVar(&o.name, "name", "sluice-interop:dcpstream", "DCP connection name (DCP_OPEN key)")
	fs.StringVar(&o.statePath, "state", "", "state file (JSON); resumed from if it exists (required)")
	fs.StringVar(&o.eventsPath, "events", "", "events file (JSON lines, appended) (required)")
	fs.Uint64Var(&o.stopAfter, "stop-after-items", 0, "exit after this many mutations/deletions/expirations in this run (0 = no limit)")
	fs.StringVar(&o.untilPath, "until-seqnos", "", "JSON {vb: seqno}: stream every vbucket up to that seqno (default: the current high seqnos)")
	fs.StringVar(&o.seqnosOut, "seqnos-out", "", "write the targets used (JSON {vb: seqno}) to this file")
	fs.Float64Var(&timeoutS, "timeout", 120, "give up after this many seconds (exit code 2)")
	fs.BoolVar(&o.expiryOpcode, "expiry-opcode", false, "negotiate enable_expiry_opcode (and the IncludeDeleteTimes open flag) so TTL expiries arrive as DCP_EXPIRATION")
	fs.BoolVar(&o.verbose, "verbose", false, "log gocbcore's own messages to stderr")
	fs.IntVar(&o.maxRollbacks, "max-rollbacks-per-vb", 10, "fail if one vbucket needs more rollbacks than this in one run")
	if err := fs.Parse(os.Args[1:]); err != nil {
		return 1
	}
	if o.statePath == "" || o.eventsPath == "" || fs.NArg() != 0 {
		logf("--state and --events are required (and no positional arguments)")
		fs.Usage()
		return 1
	}
	o.timeout = time.Duration(timeoutS * float64(time.Second))
	start := time.Now()
	deadline := start.Add(o.timeout)

	state, resumed, err := loadState(o.statePath)
	if err != nil {
		logf("%v", err)
		return 1
	}
	ef, err := os.OpenFile(o.eventsPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		logf("%v", err)
		return 1
	}
	defer ef.Close()

	blog := &bootLogger{verbose: o.verbose}
	gocbcore.SetLogger(blog)

	cfg := gocbcore.DCPAgentConfig{
		UserAgent:  "sluice-interop-dcpstream",
		BucketName: o.bucket,
		SeedConfig: gocbcore.SeedConfig{MemdAddrs: []string{o.addr}},
		SecurityConfig: gocbcore.SecurityConfig{
			Auth: gocbcore.PasswordAuthProvider{Username: o.user, Password: o.password},
		},
		DCPConfig: gocbcore.DCPConfig{UseExpiryOpcode: o.expiryOpcode},
	}
	openFlags := memd.DcpOpenFlag(0)
	if o.expiryOpcode {
		openFlags |= memd.DcpOpenFlagIncludeDeleteTimes
	}
	agent, err := gocbcore.CreateDcpAgent(&cfg, o.name, openFlags)
	if err != nil {
		logf("CreateDcpAgent: %v", err)
		return 1
	}
	closeAgent := func() {
		done := make(chan struct{})
		go func() { _ = agent.Close(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			logf("agent.Close() did not return within 10s")
		}
	}

	readyBy := deadline
	if d := start.Add(30 * time.Second); d.Before(readyBy) {
		readyBy = d
	}
	if err := waitReady(agent, readyBy); err != nil {
		logf("DCP agent not ready (bootstrap: HELLO, SASL, SELECT_BUCKET, GET_CLUSTER_CONFIG, DCP_OPEN, DCP_CONTROL) against %s: %v", o.addr, err)
		var kv *gocbcore.KeyValueError
		if errors.As(err, &kv) && kv.DocumentKey != "" && (errors.Is(err, gocbcore.ErrMemdNotSupported) ||
			errors.Is(err, gocbcore.ErrMemdInvalidArgs) || errors.Is(err, gocbcore.ErrMemdUnknownCommand)) {
			// The bootstrap requests that carry a key: DCP_OPEN (the connection name) and
			// DCP_CONTROL (the setting name).
			what := "DCP_CONTROL " + strconv.Quote(kv.DocumentKey)
			if kv.DocumentKey == o.name {
				what = "DCP_OPEN (connection name " + strconv.Quote(kv.DocumentKey) + ")"
			}
			logf("the server refused %s with status 0x%02x %s", what, uint16(kv.StatusCode), kv.ErrorName)
		}
		if rec := blog.recent(); rec != "" {
			logf("last gocbcore messages:\n  %s", rec)
		}
		closeAgent()
		return 1
	}

	var targets map[uint16]uint64
	if o.untilPath != "" {
		targets, err = readTargets(o.untilPath)
	} else {
		targets, err = fetchTargets(agent, deadline)
	}
	if err != nil {
		logf("targets: %v", err)
		closeAgent()
		return 1
	}
	if o.seqnosOut != "" {
		if err := writeTargets(o.seqnosOut, targets); err != nil {
			logf("--seqnos-out: %v", err)
			closeAgent()
			return 1
		}
	}

	s := &streamer{
		opts: o, agent: agent, events: bufio.NewWriterSize(ef, 1<<20), state: state,
		runs: map[uint16]*vbRun{}, resumed: resumed, counts: map[string]uint64{},
		reopenCh: make(chan uint16, 4096), fatalCh: make(chan error, 1), stopCh: make(chan string, 1),
		doneCh: make(chan struct{}), endsDoneCh: make(chan struct{}, 1),
	}
	var toOpen []uint16
	for vb, t := range targets {
		have := uint64(0)
		if st := state[vb]; st != nil {
			have = st.SeqNo
		}
		if t == 0 || t <= have {
			continue
		}
		s.runs[vb] = &vbRun{target: t}
		toOpen = append(toOpen, vb)
	}
	sort.Slice(toOpen, func(i, j int) bool { return toOpen[i] < toOpen[j] })
	s.notDone = len(toOpen)

	s.mu.Lock()
	s.writeEventLocked(map[string]interface{}{"type": "start", "pid": os.Getpid(), "resumed": resumed,
		"vbuckets": len(toOpen)})
	s.mu.Unlock()

	if len(toOpen) == 0 {
		s.doneOnce.Do(func() { close(s.doneCh) })
	}
	for _, vb := range toOpen {
		s.openStream(vb)
	}

	sigCh := make(chan os.Signal, 2)
	signal.Notify(sigCh, syscall.SIGINT, syscall.SIGTERM)
	ticker := time.NewTicker(time.Second)
	defer ticker.Stop()
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()

	exit := 0
	reason := ""
loop:
	for {
		select {
		case vb := <-s.reopenCh:
			s.openStream(vb)
		case <-ticker.C:
			if err := s.save(); err != nil {
				logf("saving state: %v", err)
				exit, reason = 1, "fatal"
				break loop
			}
		case reason = <-s.stopCh:
			break loop
		case <-s.doneCh:
			reason = "complete"
			// Every vbucket reached its target; give the producer a moment to send the
			// STREAM_ENDs of streams that are still open, so they are recorded too.
			grace := time.NewTimer(3 * time.Second)
			s.mu.Lock()
			open := s.openVbs
			s.mu.Unlock()
			if open > 0 {
				select {
				case <-s.endsDoneCh:
				case <-grace.C:
				}
			}
			grace.Stop()
			break loop
		case err := <-s.fatalCh:
			logf("fatal: %v", err)
			exit, reason = 3, "fatal"
			break loop
		case sig := <-sigCh:
			logf("interrupted by %v", sig)
			exit, reason = 130, "signal"
			break loop
		case <-timer.C:
			exit, reason = 2, "timeout"
			break loop
		}
	}

	s.mu.Lock()
	s.stopped = true
	var pending []string
	openNow := s.openVbs
	for _, vb := range toOpen {
		r := s.runs[vb]
		if !r.done {
			if len(pending) < 20 {
				pending = append(pending, fmt.Sprintf("vb %d at %d/%d", vb, s.stateFor(vb).SeqNo, r.target))
			} else if len(pending) == 20 {
				pending = append(pending, "...")
			}
		}
	}
	notDone := s.notDone
	s.writeEventLocked(map[string]interface{}{"type": "stop", "reason": reason})
	if err := s.saveLocked(); err != nil {
		logf("saving state: %v", err)
		if exit == 0 {
			exit = 1
		}
	}
	s.mu.Unlock()
	if exit == 2 {
		logf("timeout after %.0fs: %d of %d vbuckets not at their target seqno (%d streams open/pending): %s",
			o.timeout.Seconds(), notDone, len(toOpen), openNow, strings.Join(pending, ", "))
	}
	closeAgent()

	s.mu.Lock()
	viol := s.viol
	summary := map[string]interface{}{
		"items": s.items, "vbuckets": len(toOpen), "rollbacks": s.rollback,
		"mutations": s.counts["mutation"], "deletions": s.counts["deletion"],
		"expirations": s.counts["expiration"], "snapshots": s.counts["snapshot"],
		"ends": s.counts["end"], "reopens": s.reopens, "short_ends": s.short,
		"violations": viol, "incomplete_vbuckets": notDone, "stop": reason,
		"resumed": resumed, "seconds": time.Since(start).Seconds(),
	}
	s.mu.Unlock()
	b, _ := json.Marshal(summary)
	fmt.Println(string(b))
	if exit == 0 && viol > 0 {
		logf("%d ordering/protocol violations in the stream (see above)", viol)
		exit = 4
	}
	return exit
}
