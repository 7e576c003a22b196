// Command metaops drives SET_WITH_META (0xa2), DEL_WITH_META (0xa8) and GET_META (0xa0)
// through gocbcore v10.8.1's public Agent API (Agent.SetMeta / DeleteMeta / GetMeta), the
// way an XDCR-like replicator written on gocbcore stores versions made elsewhere: with their
// own CAS, revision (rev_seqno), flags and expiry, conflict-resolved by the target.
//
//	metaops --addr 127.0.0.1:11210 --bucket default --user U --password P \
//	        [--scenario full|short] [--key doc] [--timeout 30]
//
// It runs one built-in scenario on --key and prints a JSON array on stdout, one object per
// step, in order:
//
//	{"step": NAME, "ok": bool, "cas": N,               // the CAS the server answered
//	 "status": N, "error_name": S, "error": S, "sentinel": S,  // when the step failed
//	 "sent_cas": N,                                    // the meta CAS the request carried
//	 "meta": {"deleted", "flags", "expiry", "rev", "cas", "datatype"}}  // GET_META steps
//
// "status" is the memcached status of the answer (from *gocbcore.KeyValueError), "sentinel"
// the gocbcore error it maps to (gocbcore turns KEY_EEXISTS into ErrDocumentExists, EINVAL
// into ErrInvalidArgument, EACCESS into ErrAuthenticationFailure). A failed step does not
// stop the scenario: the test decides which failures were expected. Exit codes: 0 the
// array was printed, 1 usage or setup error (bootstrap, e.g. a wrong password).
//
// Wire notes (gocbcore's encoding, see crudcomponent.go): SetMeta/DeleteMeta always send the
// 30-byte extras form -- flags, expiry, rev_seqno, cas, options (u32), extended-meta length
// (u16, = len(Extra), 0 here) -- and header CAS 0, so a header-CAS check cannot be asked
// for; GetMeta sends 1 byte of extras (version 2) and requires 21 bytes back (the last is
// the datatype). gocbcore has no ADD_WITH_META and no quiet forms.
package main

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/couchbase/gocbcore/v10"
	"github.com/couchbase/gocbcore/v10/memd"
)

// The meta CAS of the versions "made elsewhere": far above any CAS this server would make
// now (CAS is nanoseconds since the epoch, ~0x18.. in 2025), so a CAS that comes back equal
// to it was taken from the request, not generated.
const remoteCas uint64 = 0x7000000000000000

// Options bits of a *_WITH_META request.
const (
	optForceAccept  uint32 = 0x02 // FORCE_ACCEPT_WITH_META_OPS: for last-write-wins buckets
	optRegenerate   uint32 = 0x04 // REGENERATE_CAS: a new local CAS (only with skip)
	optSkipConflict uint32 = 0x08 // SKIP_CONFLICT_RESOLUTION
)

const (
	dtJSON  = uint8(memd.DatatypeFlagJSON)   // 0x01
	dtXattr = uint8(memd.DatatypeFlagXattrs) // 0x04
)

type metaOut struct {
	Deleted  uint32 `json:"deleted"`
	Flags    uint32 `json:"flags"`
	Expiry   uint32 `json:"expiry"`
	Rev      uint64 `json:"rev"`
	Cas      uint64 `json:"cas"`
	Datatype uint8  `json:"datatype"`
}

type stepOut struct {
	Step      string   `json:"step"`
	OK        bool     `json:"ok"`
	Cas       uint64   `json:"cas"`
	SentCas   *uint64  `json:"sent_cas,omitempty"`
	Status    *uint16  `json:"status,omitempty"`
	ErrorName string   `json:"error_name,omitempty"`
	Error     string   `json:"error,omitempty"`
	Sentinel  string   `json:"sentinel,omitempty"`
	Meta      *metaOut `json:"meta,omitempty"`
}

type runner struct {
	agent   *gocbcore.Agent
	key     []byte
	timeout time.Duration
	steps   []stepOut
	// Options every *_WITH_META carries besides its own (--lww: FORCE_ACCEPT_WITH_META_OPS).
	base uint32
}

// sentinels: the gocbcore errors a refusal of these commands may map to.
var sentinels = []struct {
	name string
	err  error
}{
	{"document_exists", gocbcore.ErrDocumentExists},
	{"cas_mismatch", gocbcore.ErrCasMismatch},
	{"invalid_argument", gocbcore.ErrInvalidArgument},
	{"authentication_failure", gocbcore.ErrAuthenticationFailure},
	{"document_not_found", gocbcore.ErrDocumentNotFound},
	{"unsupported_operation", gocbcore.ErrUnsupportedOperation},
	{"timeout", gocbcore.ErrTimeout},
}

// record appends a step: its CAS on success, else its error with the memd status.
func (r *runner) record(s stepOut, cas gocbcore.Cas, err error) {
	if err == nil {
		s.OK, s.Cas = true, uint64(cas)
	} else {
		s.Error = err.Error()
		var kv *gocbcore.KeyValueError
		if errors.As(err, &kv) {
			st := uint16(kv.StatusCode)
			s.Status, s.ErrorName = &st, kv.ErrorName
		}
		for _, c := range sentinels {
			if errors.Is(err, c.err) {
				s.Sentinel = c.name
				break
			}
		}
	}
	r.steps = append(r.steps, s)
}

type casErr struct {
	cas gocbcore.Cas
	err error
}

// wait turns gocbcore's callback style into a blocking call. Every op gets a Deadline, so
// its callback always comes (with ErrTimeout at worst).
func wait(dispatch func(done func(gocbcore.Cas, error)) (gocbcore.PendingOp, error)) (gocbcore.Cas, error) {
	ch := make(chan casErr, 1)
	if _, err := dispatch(func(c gocbcore.Cas, err error) { ch <- casErr{c, err} }); err != nil {
		return 0, err
	}
	r := <-ch
	return r.cas, r.err
}

// setMeta: SET_WITH_META of value with the given metadata and options.
func (r *runner) setMeta(step string, rev, cas uint64, flags, options uint32, datatype uint8, value []byte) {
	c, err := wait(func(done func(gocbcore.Cas, error)) (gocbcore.PendingOp, error) {
		return r.agent.SetMeta(gocbcore.SetMetaOptions{
			Key: r.key, Value: value, Datatype: datatype, Options: options | r.base,
			Flags: flags, Expiry: 0, Cas: gocbcore.Cas(cas), RevNo: rev,
			Deadline: time.Now().Add(r.timeout),
		}, func(res *gocbcore.SetMetaResult, err error) {
			if err != nil {
				done(0, err)
				return
			}
			done(res.Cas, nil)
		})
	})
	r.record(stepOut{Step: step, SentCas: &cas}, c, err)
}

// deleteMeta: DEL_WITH_META, leaving a tombstone that carries rev and cas.
func (r *runner) deleteMeta(step string, rev, cas uint64, options uint32) {
	c, err := wait(func(done func(gocbcore.Cas, error)) (gocbcore.PendingOp, error) {
		return r.agent.DeleteMeta(gocbcore.DeleteMetaOptions{
			Key: r.key, Options: options | r.base, Cas: gocbcore.Cas(cas), RevNo: rev,
			Deadline: time.Now().Add(r.timeout),
		}, func(res *gocbcore.DeleteMetaResult, err error) {
			if err != nil {
				done(0, err)
				return
			}
			done(res.Cas, nil)
		})
	})
	r.record(stepOut{Step: step, SentCas: &cas}, c, err)
}

// getMeta: GET_META, which also answers for a tombstone (Deleted = 1).
func (r *runner) getMeta(step string) {
	var m *metaOut
	c, err := wait(func(done func(gocbcore.Cas, error)) (gocbcore.PendingOp, error) {
		return r.agent.GetMeta(gocbcore.GetMetaOptions{
			Key: r.key, Deadline: time.Now().Add(r.timeout),
		}, func(res *gocbcore.GetMetaResult, err error) {
			if err != nil {
				done(0, err)
				return
			}
			m = &metaOut{Deleted: res.Deleted, Flags: res.Flags, Expiry: res.Expiry,
				Rev: uint64(res.SeqNo), Cas: uint64(res.Cas), Datatype: res.Datatype}
			done(res.Cas, nil)
		})
	})
	r.record(stepOut{Step: step, Meta: m}, c, err)
}

// localSet: an ordinary SET, the bucket's own write after the replicated versions.
func (r *runner) localSet(step string, value []byte) {
	c, err := wait(func(done func(gocbcore.Cas, error)) (gocbcore.PendingOp, error) {
		return r.agent.Set(gocbcore.SetOptions{
			Key: r.key, Value: value, Datatype: dtJSON, Deadline: time.Now().Add(r.timeout),
		}, func(res *gocbcore.StoreResult, err error) {
			if err != nil {
				done(0, err)
				return
			}
			done(res.Cas, nil)
		})
	})
	r.record(stepOut{Step: step}, c, err)
}

// withXattrs encodes a value with an xattr section in front of body, as a document with
// datatype XATTR carries it: u32 total length of the pairs, then per pair u32 length and
// "key\0value\0".
func withXattrs(body []byte, pairs ...[2]string) []byte {
	var section []byte
	for _, p := range pairs {
		kv := append(append(append([]byte(p[0]), 0), p[1]...), 0)
		section = binary.BigEndian.AppendUint32(section, uint32(len(kv)))
		section = append(section, kv...)
	}
	out := binary.BigEndian.AppendUint32(nil, uint32(len(section)))
	return append(append(out, section...), body...)
}

// full: the conflict-resolution walk, run by a user allowed everything (the test's
// Administrator). The expected outcome of each step is in its comment; the Python test
// asserts them.
func (r *runner) full() {
	C := remoteCas
	if r.base != 0 {
		// A last-write-wins bucket refuses a version without FORCE_ACCEPT_WITH_META_OPS:
		// EINVAL, nothing stored.
		base := r.base
		r.base = 0
		r.setMeta("set_without_force_accept", 10, C, 0x11, 0, dtJSON, []byte(`{"v":1}`))
		r.base = base
	}
	// A new key: stored as sent, answering the request's meta CAS.
	r.setMeta("set_new", 10, C, 0x11, 0, dtJSON, []byte(`{"v":1}`))
	r.getMeta("get_meta_new") // rev 10, cas C, flags 0x11, live
	// An older revision loses whatever its CAS: KEY_EEXISTS.
	r.setMeta("set_older_rev", 9, C+10, 0x11, 0, dtJSON, []byte(`{"v":"old"}`))
	// A newer revision wins even with a smaller CAS (revision compares first), here with
	// an xattr section (datatype JSON|XATTR), as XDCR ships a document's system xattrs.
	r.setMeta("set_newer_rev_xattr", 11, C-5, 0x11, 0, dtJSON|dtXattr,
		withXattrs([]byte(`{"v":2}`), [2]string{"_sync", `{"src":"remote"}`}))
	r.getMeta("get_meta_xattr") // rev 11, cas C-5, datatype with the XATTR bit
	// A deletion made elsewhere: a tombstone with rev 12, cas C+1.
	r.deleteMeta("delete_meta", 12, C+1, 0)
	r.getMeta("get_meta_tombstone") // deleted 1, rev 12, cas C+1
	// Behind the tombstone: rev 11 < 12, refused even though no live document exists.
	r.setMeta("set_behind_tombstone", 11, C+2, 0x11, 0, dtJSON, []byte(`{"v":"late"}`))
	// REGENERATE_CAS without skipping conflict resolution is not a valid combination.
	r.setMeta("set_regenerate_alone", 13, C+3, 0x11, optRegenerate, dtJSON, []byte(`{}`))
	// Skipping conflict resolution stores even rev 1; REGENERATE_CAS answers a local CAS.
	r.setMeta("set_skip_regenerate", 1, C+3, 0x22, optSkipConflict|optRegenerate, dtJSON,
		[]byte(`{"v":3}`))
	r.getMeta("get_meta_regenerated") // live, rev 1, flags 0x22, cas = the answered one
	// FORCE_ACCEPT_WITH_META_OPS is for last-write-wins buckets: EINVAL on a revision one.
	r.setMeta("set_force_accept", 20, C+4, 0x11, optForceAccept, dtJSON, []byte(`{}`))
	// A local write after the replicated versions: a larger CAS and rev + 1.
	r.localSet("local_set", []byte(`{"v":"local"}`))
	r.getMeta("get_meta_local") // rev 2, cas = local_set's
	// The very same metadata as the current version (no xattrs): refused, nothing to do.
	if len(r.steps) > 0 {
		last := r.steps[len(r.steps)-1]
		if last.Meta != nil {
			r.setMeta("set_identical", last.Meta.Rev, last.Meta.Cas, last.Meta.Flags, 0, dtJSON,
				[]byte(`{"v":"same"}`))
		}
	}
}

// short: what a role check needs -- one write of each kind and a read of metadata.
func (r *runner) short() {
	r.setMeta("set_new", 5, remoteCas, 0, 0, dtJSON, []byte(`{"by":"replicator"}`))
	r.getMeta("get_meta")
	r.deleteMeta("delete_meta", 6, remoteCas+1, 0)
}

func main() { os.Exit(run()) }

func run() int {
	fs := flag.NewFlagSet("metaops", flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:11210", "KV address host:port")
	bucket := fs.String("bucket", "default", "bucket name")
	user := fs.String("user", "Administrator", "user name")
	password := fs.String("password", "password", "password")
	scenario := fs.String("scenario", "full", "full (conflict resolution walk) or short (role check)")
	lww := fs.Bool("lww", false, "the bucket resolves by last write wins: every *_WITH_META "+
		"carries FORCE_ACCEPT_WITH_META_OPS, as XDCR sends them to such a bucket")
	key := fs.String("key", "meta-doc", "document key the scenario works on")
	timeoutS := fs.Float64("timeout", 30, "seconds for bootstrap and for each operation")
	if err := fs.Parse(os.Args[1:]); err != nil || fs.NArg() != 0 ||
		(*scenario != "full" && *scenario != "short") {
		fmt.Fprintln(os.Stderr, "metaops: bad arguments (--scenario is full or short)")
		return 1
	}
	timeout := time.Duration(*timeoutS * float64(time.Second))

	// A plain KV agent. Collections on, as a current replicator runs; the scenario uses the
	// default collection (no names: no collection-id lookup). gocbcore's HELLO always asks
	// for XATTR (and JSON, XERROR unless disabled), which the xattr step relies on.
	cfg := gocbcore.AgentConfig{
		UserAgent: "sluice-interop-metaops", BucketName: *bucket,
		SeedConfig:     gocbcore.SeedConfig{MemdAddrs: []string{*addr}},
		SecurityConfig: gocbcore.SecurityConfig{Auth: gocbcore.PasswordAuthProvider{Username: *user, Password: *password}},
		IoConfig:       gocbcore.IoConfig{UseCollections: true},
	}
	agent, err := gocbcore.CreateAgent(&cfg)
	if err != nil {
		fmt.Fprintf(os.Stderr, "metaops: CreateAgent: %v\n", err)
		return 1
	}
	defer agent.Close()
	ready := make(chan error, 1)
	if _, err := agent.WaitUntilReady(time.Now().Add(timeout), gocbcore.WaitUntilReadyOptions{
		ServiceTypes: []gocbcore.ServiceType{gocbcore.MemdService},
	}, func(_ *gocbcore.WaitUntilReadyResult, err error) { ready <- err }); err != nil {
		fmt.Fprintf(os.Stderr, "metaops: WaitUntilReady: %v\n", err)
		return 1
	}
	if err := <-ready; err != nil {
		fmt.Fprintf(os.Stderr, "metaops: agent not ready (HELLO, SASL, SELECT_BUCKET, config): %v\n", err)
		return 1
	}

	r := &runner{agent: agent, key: []byte(*key), timeout: timeout, steps: []stepOut{}}
	if *lww {
		r.base = optForceAccept
	}
	if *scenario == "full" {
		r.full()
	} else {
		r.short()
	}
	out, err := json.MarshalIndent(r.steps, "", "  ")
	if err != nil {
		fmt.Fprintf(os.Stderr, "metaops: %v\n", err)
		return 1
	}
	fmt.Println(string(out))
	return 0
}
