module sluice.dev/dcpinterop

go 1.21

require github.com/couchbase/gocbcore/v10 v10.8.1

require (
	github.com/golang/snappy v1.0.0 // indirect
	github.com/google/uuid v1.6.0 // indirect
	github.com/gorilla/websocket v1.5.3 // indirect
)
