// gocbcore.StreamObserver: what arrives on the streams. gocbcore calls these from one
// goroutine per connection (its DCP queue), in stream order.

package main

import (
	"errors"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/couchbase/gocbcore/v10"
)

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

// itemLocked records one mutation/deletion/expiration (or, with --collections, a scope or
// collection event): a message that moves the vbucket's position and counts as an item.
func (s *streamer) itemLocked(kind string, vb uint16, seqno uint64, ev interface{}) {
	if !s.advanceLocked(kind, vb, seqno, ev) {
		return
	}
	s.items++
	if s.opts.stopAfter > 0 && s.items >= s.opts.stopAfter {
		s.stopped = true
		s.requestStop("items")
	}
}

// advanceLocked checks a message that carries the vbucket's next position (an item, or a
// SEQNO_ADVANCED) against the stream's snapshot marker and the last seqno received, writes
// its event, moves the position (st.SeqNo and the snapshot range to resume from) and marks
// the vbucket done once its target is reached. It reports whether the message was taken
// (false once stopped or for a vbucket not being streamed).
func (s *streamer) advanceLocked(kind string, vb uint16, seqno uint64, ev interface{}) bool {
	if s.stopped {
		return false
	}
	r := s.runs[vb]
	if r == nil {
		logf("vb %d: %s seqno %d for a vbucket not being streamed", vb, kind, seqno)
		s.viol++
		return false
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
	s.counts[kind]++
	if r.target > 0 && st.SeqNo >= r.target {
		s.markDoneLocked(vb, r)
	}
	return true
}

func (o observer) Mutation(m gocbcore.DcpMutation) {
	flags, expiry, dt := m.Flags, m.Expiry, m.Datatype
	ev := &itemEvent{Type: "mutation", Vb: m.VbID, SeqNo: m.SeqNo, Key: string(m.Key), Rev: m.RevNo,
		Cas: m.Cas, Flags: &flags, Expiry: &expiry, Datatype: &dt, Collection: o.collection(m.CollectionID)}
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
	ev := &itemEvent{Type: "deletion", Vb: d.VbID, SeqNo: d.SeqNo, Key: string(d.Key), Rev: d.RevNo, Cas: d.Cas,
		Collection: o.collection(d.CollectionID)}
	o.s.mu.Lock()
	defer o.s.mu.Unlock()
	o.s.itemLocked("deletion", d.VbID, d.SeqNo, ev)
}

func (o observer) Expiration(e gocbcore.DcpExpiration) {
	ev := &itemEvent{Type: "expiration", Vb: e.VbID, SeqNo: e.SeqNo, Key: string(e.Key), Rev: e.RevNo, Cas: e.Cas,
		Collection: o.collection(e.CollectionID)}
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
	// e.g. "unknown stream close reason (6)" (rollback) or a connection error; drop the
	// JSON context gocbcore appends after " | ".
	msg := err.Error()
	if i := strings.Index(msg, " | "); i >= 0 {
		msg = msg[:i]
	}
	return msg
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

// collection: a document's collection id for its event, with --collections only.
func (o observer) collection(cid uint32) *uint32 {
	if !o.s.opts.collections {
		return nil
	}
	return &cid
}

func (o observer) CreateCollection(c gocbcore.DcpCollectionCreation) {
	o.s.systemEvent(&systemEvent{Type: "create_collection", Vb: c.VbID, SeqNo: c.SeqNo,
		ManifestUID: c.ManifestUID, ScopeID: c.ScopeID, CollectionID: c.CollectionID, Name: string(c.Key)})
}

func (o observer) DeleteCollection(c gocbcore.DcpCollectionDeletion) {
	o.s.systemEvent(&systemEvent{Type: "delete_collection", Vb: c.VbID, SeqNo: c.SeqNo,
		ManifestUID: c.ManifestUID, ScopeID: c.ScopeID, CollectionID: c.CollectionID})
}

func (o observer) FlushCollection(c gocbcore.DcpCollectionFlush) {
	// Never sent by a 7.x producer (flush events are gone).
	o.s.unexpected("flush_collection", c.VbID, c.SeqNo)
}

func (o observer) CreateScope(c gocbcore.DcpScopeCreation) {
	o.s.systemEvent(&systemEvent{Type: "create_scope", Vb: c.VbID, SeqNo: c.SeqNo,
		ManifestUID: c.ManifestUID, ScopeID: c.ScopeID, Name: string(c.Key)})
}

func (o observer) DeleteScope(c gocbcore.DcpScopeDeletion) {
	o.s.systemEvent(&systemEvent{Type: "delete_scope", Vb: c.VbID, SeqNo: c.SeqNo,
		ManifestUID: c.ManifestUID, ScopeID: c.ScopeID})
}

func (o observer) ModifyCollection(c gocbcore.DcpCollectionModification) {
	// Only with FlatBuffers system events, which this client does not ask for.
	o.s.unexpected("modify_collection", c.VbID, c.SeqNo)
}

func (o observer) OSOSnapshot(snap gocbcore.DcpOSOSnapshot) {
	// Not negotiated (UseOSOBackfill is off): a producer must not send it.
	o.s.unexpected("oso_snapshot", snap.VbID, 0)
}

// SeqNoAdvanced: a collection-aware producer sends it at the end of a snapshot whose last
// seqno is not a message this stream shows (another collection's item on a filtered stream,
// a backfill whose tail was filtered out). Its seqno is the client's new position: it must
// lie in the current snapshot and above the last seqno received, it is saved as the resume
// point like an item's seqno and it counts toward the vbucket's target (a filtered stream
// whose last seqnos are another collection's reaches its target only through it). It is no
// item: it does not count toward --stop-after-items nor the "items" total. A connection
// without collections must never receive it.
func (o observer) SeqNoAdvanced(a gocbcore.DcpSeqNoAdvanced) {
	s := o.s
	if !s.opts.collections {
		s.unexpected("seqno_advanced", a.VbID, a.SeqNo)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.advanceLocked("seqno_advanced", a.VbID, a.SeqNo,
		seqnoAdvancedEvent{Type: "seqno_advanced", Vb: a.VbID, SeqNo: a.SeqNo})
}

// systemEvent: collection/scope events are only sent to collection-aware connections:
// recorded like any item with --collections, a producer error without.
func (s *streamer) systemEvent(ev *systemEvent) {
	if !s.opts.collections {
		s.unexpected(ev.Type, ev.Vb, ev.SeqNo)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.itemLocked(ev.Type, ev.Vb, ev.SeqNo, ev)
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
