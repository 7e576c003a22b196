// The lines of the events file (JSON lines; see the package comment).

package main

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
	// With --collections: the document's collection id.
	Collection *uint32 `json:"collection,omitempty"`
}

// A scope or collection made or dropped (--collections only).
type systemEvent struct {
	Type         string `json:"type"`
	Vb           uint16 `json:"vb"`
	SeqNo        uint64 `json:"seqno"`
	ManifestUID  uint64 `json:"manifest_uid"`
	ScopeID      uint32 `json:"scope_id"`
	CollectionID uint32 `json:"collection_id"`
	Name         string `json:"name,omitempty"`
}

// A SEQNO_ADVANCED (--collections only): the vbucket's position moved to seqno without a
// message this stream shows.
type seqnoAdvancedEvent struct {
	Type  string `json:"type"`
	Vb    uint16 `json:"vb"`
	SeqNo uint64 `json:"seqno"`
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
