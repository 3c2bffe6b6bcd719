// Package senders answers who sends mail as a domain and when it can move
// to an enforcing DMARC policy: the sources, senders and policy-advice
// views of API.md, computed from the per-source roll-ups that ingest keeps
// (store.EachSourceDay), never from report records.
//
// Its parts: the known-sender map (knownsenders.go, embedded from
// parsedmarc), SPF authorization (spf.go), a background reverse DNS job
// (rdns.go) and the views (views.go, advice.go). It never sits in the
// ingest path.
package senders
