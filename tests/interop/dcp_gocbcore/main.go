// Command dcpstream streams every change of a bucket over DCP with gocbcore's DCP agent
// (github.com/couchbase/gocbcore/v10 v10.8.1, the client Couchbase's own Go tools use) and
// writes what it receives to a JSON-lines file, so an interop test can check a DCP producer
// with a client written by others. It can stop part-way and resume from a saved state.
//
//	dcpstream --addr 127.0.0.1:11210 --bucket default --user Administrator --password password \
//	          --state state.json --events events.jsonl [--stop-after-items N] \
//	          [--until-seqnos seqnos.json] [--timeout 120] [--collections [--filter-collection ID]]
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
//	{"type":"create_collection"|"delete_collection"|"create_scope"|"delete_scope","vb":..,
//	 "seqno":..,"manifest_uid":..,"scope_id":..,"collection_id":..,"name":..}  (--collections)
//	(with --collections, document events also carry "collection": its id)
//	{"type":"seqno_advanced","vb":..,"seqno":..}   (--collections) the position moved to seqno
//	                                               without a message this stream shows
//	{"type":"end","vb":..,"reason":"ok"|"closed"|"state_changed"|..}
//	{"type":"rollback","vb":..,"to":..,"from":..,"snap_start":..,"snap_end":..,"vbuuid":..}
//	{"type":"stop","reason":"items"|"complete"|"timeout"|"signal"|"fatal"}
//
// Streams end by themselves: the end seqno of every stream request is the vbucket's target
// (--until-seqnos, a JSON object {"vb": high_seqno} as GET_ALL_VB_SEQNOS reports; without it
// the current high seqnos are fetched with GET_ALL_VB_SEQNOS first). A vbucket whose target
// is 0 (and nothing saved) is not streamed, nor one whose target is not above the resumed
// seqno if the client is still on the producer's current branch (DCP_GET_FAILOVER_LOG);
// on another branch it is asked anyway (end = start) so that the producer can demand a
// rollback. When OpenStream answers ROLLBACK(seqno) the vbucket's state is cut back to that
// seqno (failover entries above it dropped, uuid = newest remaining entry) and the request
// is sent again. The program exits 0 when every vbucket reached its target (or
// --stop-after-items items were received in this run) and prints one JSON line to stdout:
// {"items":N,"vbuckets":M,"rollbacks":R,...}.
// Exit codes: 0 ok, 1 usage/setup error, 2 timeout, 3 fatal stream error, 4 ordering
// violations seen in the stream, 130 interrupted.
//
// Files: main.go (flags, setup, run loop), streamer.go (per-vbucket bookkeeping, stream
// requests, rollbacks, saving), observer.go (gocbcore.StreamObserver), state.go (state
// file), events.go (events file lines), setup.go (targets, logging, readiness).
// fake_producer.py is not part of the program: it is the fake DCP producer the guard tests
// of ../test_dcp_gocbcore.py run this program against.
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/couchbase/gocbcore/v10"
	"github.com/couchbase/gocbcore/v10/memd"
)

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
	fs.BoolVar(&o.collections, "collections", false, "negotiate collections: scope/collection events are expected and mutations carry their collection id")
	fs.Int64Var(&o.filterCollection, "filter-collection", -1, "with --collections: stream only this collection id (a DCP stream filter)")
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
		IoConfig:  gocbcore.IoConfig{UseCollections: o.collections},
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
	toOpen := s.planStreams(targets, deadline)
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
		"ends": s.counts["end"], "seqno_advanced": s.counts["seqno_advanced"],
		"reopens": s.reopens, "short_ends": s.short,
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
