// Command sidstream checks DCP stream ids with gocbcore v10.8.1's DCP agent: on one
// collection-aware connection with enable_stream_id it opens, on every active vbucket, one
// stream per collection given (sid = its position in --collections, 1-based), each filtered
// to that collection, from seqno 0 to the vbucket's high seqno (GET_ALL_VB_SEQNOS). So
// every vbucket carries several streams at once, told apart only by their sid.
//
//	sidstream --addr 127.0.0.1:11210 --bucket default --user U --password P \
//	          --collections 8,9 --out summary.json [--timeout 120] [--name N]
//
// Then, on the lowest vbucket streamed, it opens (sid 1, endless), asks for the same
// (vb, sid) again (which the producer must refuse), closes (vb, sid 1) by sid and opens it
// once more (the sid must be free again). The JSON summary written to --out holds per sid
// the last event of every key, the collections seen and the message counts; per (vb, sid)
// how its stream ended and the position it reached; the protocol violations seen (a message
// whose vbucket or sid is not its stream's, an item or collection event of another
// collection, seqnos not increasing per (vb, sid), a message outside its snapshot marker);
// and how the duplicate/close/reopen went. Exit codes: 0 summary written, 1 usage or setup
// error, 2 timeout (a summary is still written).
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/couchbase/gocbcore/v10"
	"github.com/couchbase/gocbcore/v10/memd"
)

type keyEvent struct {
	Kind  string `json:"kind"`
	Vb    uint16 `json:"vb"`
	SeqNo uint64 `json:"seqno"`
	Value string `json:"value"`
}

// sidSummary: everything the streams of one sid (one collection) delivered, all vbuckets.
type sidSummary struct {
	Collection       uint32              `json:"collection"`
	Keys             map[string]keyEvent `json:"keys"` // the last event of each key
	seen             map[uint32]bool
	CollectionsSeen  []uint32          `json:"collections_seen"` // of documents and collection events
	Counts           map[string]uint64 `json:"counts"`           // per message kind
	AdvancedNotAtEnd uint64            `json:"seqno_advanced_not_at_marker_end"`
	Ends             map[string]int    `json:"ends"` // stream end reason -> streams
}

// stream: one (vb, sid) stream. gocbcore routes a message to the observer of the stream
// request whose opaque it carries, so the sid in the message must be this stream's.
type stream struct {
	c                  *client
	vb, sid            uint16
	collection         uint32
	target             uint64
	main               bool // one of the per-vbucket streams (not the duplicate checks)
	haveMarker         bool
	markStart, markEnd uint64
	last               uint64 // position: the last seqno received (item or SEQNO_ADVANCED)
	lastShown          uint64 // the last seqno of an item or collection event
	advanced           uint64 // SEQNO_ADVANCEDs received
	end                string // "" while open
	ended              chan struct{}
}

type streamOut struct {
	Vb       uint16 `json:"vb"`
	Sid      uint16 `json:"sid"`
	Target   uint64 `json:"target"`
	Position uint64 `json:"position"`
	Shown    uint64 `json:"last_shown"`
	Advanced uint64 `json:"seqno_advanced"`
	End      string `json:"end"`
}

type client struct {
	mu         sync.Mutex
	sids       map[uint16]*sidSummary
	streams    []*stream
	violations []string
	nviol      int
	pending    int // main streams not ended yet
	allEnded   chan struct{}
	closing    bool // the agent is being closed: its disconnect ends are not the server's
}

func (c *client) violLocked(format string, a ...interface{}) {
	c.nviol++
	if len(c.violations) < 100 {
		c.violations = append(c.violations, fmt.Sprintf(format, a...))
	}
}

// at checks that a message belongs to this stream (its vb and sid), that it lies in the
// current snapshot marker and above the position, and moves the position to its seqno. The
// rule is the same for items, collection events and SEQNO_ADVANCED.
func (s *stream) at(kind string, vb, sid uint16, seqno uint64) {
	c := s.c
	if vb != s.vb || sid != s.sid {
		c.violLocked("stream vb %d sid %d: %s seqno %d carries vb %d sid %d", s.vb, s.sid, kind, seqno, vb, sid)
	}
	if s.end != "" {
		c.violLocked("vb %d sid %d: %s seqno %d after the stream ended (%s)", s.vb, s.sid, kind, seqno, s.end)
	}
	if !s.haveMarker {
		c.violLocked("vb %d sid %d: %s seqno %d before any snapshot marker", s.vb, s.sid, kind, seqno)
	} else if seqno < s.markStart || seqno > s.markEnd {
		c.violLocked("vb %d sid %d: %s seqno %d outside its snapshot %d..%d", s.vb, s.sid, kind, seqno, s.markStart, s.markEnd)
	}
	if seqno <= s.last {
		c.violLocked("vb %d sid %d: %s seqno %d not above the last seqno received (%d)", s.vb, s.sid, kind, seqno, s.last)
	} else {
		s.last = seqno
	}
	if s.main {
		c.sids[s.sid].Counts[kind]++
	}
}

// doc records a mutation/deletion/expiration. With collections gocbcore strips the key's
// leb128 collection prefix and gives the id in CollectionID.
func (s *stream) doc(kind string, vb, sid uint16, seqno uint64, cid uint32, key, value []byte) {
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	s.at(kind, vb, sid, seqno)
	s.ofCollection(kind, seqno, cid)
	s.lastShown = seqno
	if s.main {
		v := ""
		if utf8.Valid(value) {
			v = string(value)
		}
		s.c.sids[s.sid].Keys[string(key)] = keyEvent{kind, vb, seqno, v}
	}
}

func (s *stream) ofCollection(kind string, seqno uint64, cid uint32) {
	if cid != s.collection {
		s.c.violLocked("vb %d sid %d (collection %d): %s seqno %d of collection %d", s.vb, s.sid, s.collection, kind, seqno, cid)
	}
	if s.main {
		s.c.sids[s.sid].seen[cid] = true
	}
}

func (s *stream) SnapshotMarker(m gocbcore.DcpSnapshotMarker) {
	c := s.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if m.VbID != s.vb || m.StreamID != s.sid {
		c.violLocked("stream vb %d sid %d: snapshot marker carries vb %d sid %d", s.vb, s.sid, m.VbID, m.StreamID)
	}
	if m.StartSeqNo > m.EndSeqNo || (s.last > 0 && m.EndSeqNo <= s.last) {
		c.violLocked("vb %d sid %d: snapshot marker %d..%d (last seqno received %d)", s.vb, s.sid, m.StartSeqNo, m.EndSeqNo, s.last)
	}
	s.haveMarker, s.markStart, s.markEnd = true, m.StartSeqNo, m.EndSeqNo
	if s.main {
		c.sids[s.sid].Counts["snapshot"]++
	}
}

func (s *stream) Mutation(m gocbcore.DcpMutation) {
	s.doc("mutation", m.VbID, m.StreamID, m.SeqNo, m.CollectionID, m.Key, m.Value)
}

func (s *stream) Deletion(d gocbcore.DcpDeletion) {
	s.doc("deletion", d.VbID, d.StreamID, d.SeqNo, d.CollectionID, d.Key, nil)
}

func (s *stream) Expiration(e gocbcore.DcpExpiration) {
	s.doc("expiration", e.VbID, e.StreamID, e.SeqNo, e.CollectionID, e.Key, nil)
}

func (s *stream) collectionEvent(kind string, vb, sid uint16, seqno uint64, cid uint32) {
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	s.at(kind, vb, sid, seqno)
	s.ofCollection(kind, seqno, cid)
	s.lastShown = seqno
}

func (s *stream) CreateCollection(e gocbcore.DcpCollectionCreation) {
	s.collectionEvent("create_collection", e.VbID, e.StreamID, e.SeqNo, e.CollectionID)
}

func (s *stream) DeleteCollection(e gocbcore.DcpCollectionDeletion) {
	s.collectionEvent("delete_collection", e.VbID, e.StreamID, e.SeqNo, e.CollectionID)
}

// Scope events are not part of a collection filter; flush/modify/OSO are not negotiated.
func (s *stream) notExpected(kind string, vb, sid uint16, seqno uint64) {
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	s.at(kind, vb, sid, seqno)
	s.c.violLocked("vb %d sid %d: %s (seqno %d) on a stream filtered to collection %d", s.vb, s.sid, kind, seqno, s.collection)
}

func (s *stream) CreateScope(e gocbcore.DcpScopeCreation) {
	s.notExpected("create_scope", e.VbID, e.StreamID, e.SeqNo)
}
func (s *stream) DeleteScope(e gocbcore.DcpScopeDeletion) {
	s.notExpected("delete_scope", e.VbID, e.StreamID, e.SeqNo)
}
func (s *stream) FlushCollection(e gocbcore.DcpCollectionFlush) {
	s.notExpected("flush_collection", e.VbID, e.StreamID, e.SeqNo)
}
func (s *stream) ModifyCollection(e gocbcore.DcpCollectionModification) {
	s.notExpected("modify_collection", e.VbID, e.StreamID, e.SeqNo)
}
func (s *stream) OSOSnapshot(e gocbcore.DcpOSOSnapshot) {
	s.notExpected("oso_snapshot", e.VbID, e.StreamID, s.last+1)
}

// SeqNoAdvanced: the position moves to its seqno without a message this stream shows; the
// producer sends it at the end of a snapshot, so its seqno should be the marker's end.
func (s *stream) SeqNoAdvanced(a gocbcore.DcpSeqNoAdvanced) {
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	s.at("seqno_advanced", a.VbID, a.StreamID, a.SeqNo)
	s.advanced++
	if s.main && s.haveMarker && a.SeqNo != s.markEnd {
		s.c.sids[s.sid].AdvancedNotAtEnd++
	}
}

func (s *stream) End(e gocbcore.DcpStreamEnd, err error) {
	c := s.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closing {
		return
	}
	if e.VbID != s.vb || e.StreamID != s.sid {
		c.violLocked("stream vb %d sid %d: stream end carries vb %d sid %d", s.vb, s.sid, e.VbID, e.StreamID)
	}
	s.endLocked(endReason(err))
}

func (s *stream) endLocked(reason string) {
	c := s.c
	if s.end != "" {
		c.violLocked("vb %d sid %d: a second end (%s) after %s", s.vb, s.sid, reason, s.end)
		return
	}
	s.end = reason
	close(s.ended)
	if s.main {
		c.sids[s.sid].Ends[reason]++
		if c.pending--; c.pending == 0 {
			close(c.allEnded)
		}
	}
}

func endReason(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, gocbcore.ErrDCPStreamClosed):
		return "closed"
	case errors.Is(err, gocbcore.ErrDCPStreamFilterEmpty):
		return "filter_empty"
	case errors.Is(err, gocbcore.ErrDCPStreamStateChanged):
		return "state_changed"
	case errors.Is(err, gocbcore.ErrDCPStreamDisconnected):
		return "disconnected"
	}
	msg := err.Error() // drop the JSON context gocbcore appends after " | "
	if i := strings.Index(msg, " | "); i >= 0 {
		msg = msg[:i]
	}
	return msg
}

// open sends a stream request (sid and collection filter in its JSON value) and waits for
// its answer: "" if accepted, else the error and the memcached status (-1 if none).
func (c *client) open(agent *gocbcore.DCPAgent, s *stream, start, end uint64, wait time.Duration) (string, int) {
	res := make(chan error, 1)
	opts := gocbcore.OpenStreamOptions{
		FilterOptions: &gocbcore.OpenStreamFilterOptions{CollectionIDs: []uint32{s.collection}},
		StreamOptions: &gocbcore.OpenStreamStreamOptions{StreamID: s.sid},
	}
	_, err := agent.OpenStream(s.vb, 0, 0, gocbcore.SeqNo(start), gocbcore.SeqNo(end), 0, 0, s, opts,
		func(_ []gocbcore.FailoverEntry, err error) { res <- err })
	if err == nil {
		select {
		case err = <-res:
		case <-time.After(wait):
			return "no answer within " + wait.String(), -1
		}
	}
	return errInfo(err)
}

// errInfo: gocbcore wraps a memcached error status in a KeyValueError (KEY_EEXISTS becomes
// ErrDocumentExists, DCP_STREAM_ID_INVALID ErrDCPStreamIDInvalid).
func errInfo(err error) (string, int) {
	if err == nil {
		return "", -1
	}
	var kv *gocbcore.KeyValueError
	if errors.As(err, &kv) {
		return fmt.Sprintf("status 0x%02x %s: %v", uint16(kv.StatusCode), kv.ErrorName, kv.InnerError),
			int(kv.StatusCode)
	}
	return err.Error(), -1
}

func main() { os.Exit(run()) }

func run() int {
	fs := flag.NewFlagSet("sidstream", flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:11210", "KV address host:port")
	bucket := fs.String("bucket", "default", "bucket name")
	user := fs.String("user", "Administrator", "user name")
	password := fs.String("password", "password", "password")
	name := fs.String("name", "sluice-interop:sidstream", "DCP connection name")
	cols := fs.String("collections", "", "decimal collection ids, comma separated: sid i+1 streams the i-th")
	timeoutS := fs.Float64("timeout", 120, "seconds before giving up (exit 2)")
	out := fs.String("out", "", "summary file (JSON)")
	if err := fs.Parse(os.Args[1:]); err != nil || *out == "" || *cols == "" || fs.NArg() != 0 {
		fmt.Fprintln(os.Stderr, "sidstream: --collections and --out are required")
		return 1
	}
	start := time.Now()
	deadline := start.Add(time.Duration(*timeoutS * float64(time.Second)))
	c := &client{sids: map[uint16]*sidSummary{}, allEnded: make(chan struct{}), violations: []string{}}
	var ids []uint32
	for i, f := range strings.Split(*cols, ",") {
		id, err := strconv.ParseUint(strings.TrimSpace(f), 10, 32)
		if err != nil || i >= math.MaxUint16 {
			fmt.Fprintf(os.Stderr, "sidstream: bad --collections %q\n", *cols)
			return 1
		}
		ids = append(ids, uint32(id))
		c.sids[uint16(i+1)] = &sidSummary{Collection: uint32(id), Keys: map[string]keyEvent{},
			seen: map[uint32]bool{}, Counts: map[string]uint64{}, Ends: map[string]int{}}
	}

	cfg := gocbcore.DCPAgentConfig{
		UserAgent: "sluice-interop-sidstream", BucketName: *bucket,
		SeedConfig:     gocbcore.SeedConfig{MemdAddrs: []string{*addr}},
		SecurityConfig: gocbcore.SecurityConfig{Auth: gocbcore.PasswordAuthProvider{Username: *user, Password: *password}},
		IoConfig:       gocbcore.IoConfig{UseCollections: true},
		DCPConfig:      gocbcore.DCPConfig{UseStreamID: true}, // DCP_CONTROL enable_stream_id=true
	}
	agent, err := gocbcore.CreateDcpAgent(&cfg, *name, memd.DcpOpenFlag(0))
	if err != nil {
		fmt.Fprintf(os.Stderr, "sidstream: CreateDcpAgent: %v\n", err)
		return 1
	}
	fail := func(what string, err error) int {
		fmt.Fprintf(os.Stderr, "sidstream: %s: %v\n", what, err)
		closeAgent(c, agent)
		return 1
	}
	ready := make(chan error, 1)
	if _, err := agent.WaitUntilReady(deadline, gocbcore.WaitUntilReadyOptions{
		ServiceTypes: []gocbcore.ServiceType{gocbcore.MemdService},
	}, func(_ *gocbcore.WaitUntilReadyResult, err error) { ready <- err }); err != nil {
		return fail("WaitUntilReady", err)
	}
	if err := <-ready; err != nil {
		return fail("DCP agent not ready (HELLO, SASL, DCP_OPEN, DCP_CONTROLs incl. enable_stream_id)", err)
	}
	type seqnos struct {
		e   []gocbcore.VbSeqNoEntry
		err error
	}
	sq := make(chan seqnos, 1)
	if _, err := agent.GetVbucketSeqnos(0, memd.VbucketStateActive, gocbcore.GetVbucketSeqnoOptions{},
		func(e []gocbcore.VbSeqNoEntry, err error) { sq <- seqnos{e, err} }); err != nil {
		return fail("GET_ALL_VB_SEQNOS", err)
	}
	var r seqnos
	select {
	case r = <-sq:
	case <-time.After(time.Until(deadline)):
		r.err = fmt.Errorf("no answer")
	}
	if r.err != nil {
		return fail("GET_ALL_VB_SEQNOS", r.err)
	}
	targets := map[string]uint64{}
	var vbs []gocbcore.VbSeqNoEntry
	for _, e := range r.e {
		targets[strconv.Itoa(int(e.VbID))] = uint64(e.SeqNo)
		if e.SeqNo > 0 { // nothing to stream in an empty vbucket
			vbs = append(vbs, e)
		}
	}
	sort.Slice(vbs, func(i, j int) bool { return vbs[i].VbID < vbs[j].VbID })
	if len(vbs) == 0 {
		return fail("GET_ALL_VB_SEQNOS", fmt.Errorf("no active vbucket with a seqno above 0"))
	}

	// Every stream of a vbucket is asked for at once, so they run side by side.
	c.pending = len(vbs) * len(ids)
	openErrs := []string{}
	var oerrMu sync.Mutex
	var wg sync.WaitGroup
	for _, e := range vbs {
		for i, id := range ids {
			s := &stream{c: c, vb: e.VbID, sid: uint16(i + 1), collection: id, target: uint64(e.SeqNo),
				main: true, ended: make(chan struct{})}
			c.streams = append(c.streams, s)
			wg.Add(1)
			go func() {
				defer wg.Done()
				if msg, _ := c.open(agent, s, 0, s.target, time.Until(deadline)); msg != "" {
					oerrMu.Lock()
					openErrs = append(openErrs, fmt.Sprintf("vb %d sid %d: %s", s.vb, s.sid, msg))
					oerrMu.Unlock()
					c.mu.Lock()
					s.endLocked("open_failed")
					c.mu.Unlock()
				}
			}()
		}
	}
	wg.Wait()
	timedOut := false
	select {
	case <-c.allEnded:
	case <-time.After(time.Until(deadline)):
		timedOut = true
	}

	// The duplicate check, on a stream that stays open (end seqno "forever").
	dup := map[string]interface{}{}
	if !timedOut {
		vb, step := vbs[0].VbID, 10*time.Second
		first := &stream{c: c, vb: vb, sid: 1, collection: ids[0], ended: make(chan struct{})}
		again := &stream{c: c, vb: vb, sid: 1, collection: ids[0], ended: make(chan struct{})}
		dup["vb"] = vb
		dup["open_error"], _ = c.open(agent, first, 0, math.MaxUint64, step)
		dup["duplicate_error"], dup["duplicate_status"] = c.open(agent, again, 0, math.MaxUint64, step)
		closed := make(chan error, 1)
		_, err := agent.CloseStream(vb, gocbcore.CloseStreamOptions{
			StreamOptions: &gocbcore.CloseStreamStreamOptions{StreamID: 1}}, func(err error) { closed <- err })
		if err == nil {
			select {
			case err = <-closed:
			case <-time.After(step):
				err = fmt.Errorf("no answer within %v", step)
			}
		}
		dup["close_error"], _ = errInfo(err)
		// gocbcore asks for send_stream_end_on_client_close_stream: a STREAM_END follows.
		select {
		case <-first.ended:
		case <-time.After(5 * time.Second):
		}
		c.mu.Lock()
		dup["end_after_close"] = first.end
		c.mu.Unlock()
		// The sid is free again once closed.
		reopen := &stream{c: c, vb: vb, sid: 1, collection: ids[0], ended: make(chan struct{})}
		dup["reopen_error"], _ = c.open(agent, reopen, 0, math.MaxUint64, step)
	}

	closeAgent(c, agent)
	c.mu.Lock()
	defer c.mu.Unlock()
	streams := []streamOut{}
	for _, s := range c.streams {
		streams = append(streams, streamOut{s.vb, s.sid, s.target, s.last, s.lastShown, s.advanced, s.end})
	}
	sids := map[string]*sidSummary{}
	for sid, ss := range c.sids {
		ss.CollectionsSeen = []uint32{}
		for id := range ss.seen {
			ss.CollectionsSeen = append(ss.CollectionsSeen, id)
		}
		sort.Slice(ss.CollectionsSeen, func(i, j int) bool { return ss.CollectionsSeen[i] < ss.CollectionsSeen[j] })
		sids[strconv.Itoa(int(sid))] = ss
	}
	summary := map[string]interface{}{
		"vbuckets": len(vbs), "targets": targets, "sids": sids, "streams": streams,
		"violations": c.violations, "violation_count": c.nviol, "open_errors": openErrs,
		"duplicate": dup, "timed_out": timedOut, "seconds": time.Since(start).Seconds(),
	}
	data, err := json.MarshalIndent(summary, "", " ")
	if err == nil {
		err = os.WriteFile(*out, append(data, '\n'), 0o644)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "sidstream: writing %s: %v\n", *out, err)
		return 1
	}
	if timedOut {
		fmt.Fprintf(os.Stderr, "sidstream: timeout: %d streams did not end\n", c.pending)
		return 2
	}
	return 0
}

// closeAgent: the ends gocbcore makes up for streams still open at Close are not recorded.
func closeAgent(c *client, agent *gocbcore.DCPAgent) {
	c.mu.Lock()
	c.closing = true
	c.mu.Unlock()
	done := make(chan struct{})
	go func() { _ = agent.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
	}
}
