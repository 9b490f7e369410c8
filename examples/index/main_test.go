package main

import (
	"context"
	"io"
	"testing"
	"time"
)

// After a superpeer is stopped, every live ordinary node is in the index
// of the superpeer it names, with its items: the members registered again
// with the successor on the events alone.
func TestIndexSurvivesFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("starts 12 libp2p nodes")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	apps, err := run(ctx, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range unindexed(apps) {
		t.Error(e)
	}
}
