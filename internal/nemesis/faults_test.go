package nemesis

import (
	"context"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"

	"github.com/okengine/oke/driver"
	"github.com/okengine/oke/driver/file"
)

// TestTornTailHeals: every damage TearTail does is one the file driver
// must take as a crash's torn tail — Open succeeds and the stored response
// is still there — so that the suite's torn-tail fault tests healing, not
// a damage the driver rightly refuses.
func TestTornTailHeals(t *testing.T) {
	ctx := context.Background()
	key := driver.Key{Tenant: "t", Principal: "anon", Flow: "payments.charge", Key: "nemesis-torn-0001"}
	for kind := 0; kind < tornKinds; kind++ {
		dir := t.TempDir()
		d, err := file.Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := d.Claim(ctx, driver.ClaimRequest{Key: key, Fingerprint: "fp", Owner: "o1", Lease: time.Minute, TTL: time.Hour}); err != nil {
			t.Fatal(err)
		}
		if err := d.Complete(ctx, key, "o1", driver.Response{Status: 201, Body: []byte(`{"id":"ch_1"}`)}, time.Hour); err != nil {
			t.Fatal(err)
		}
		if err := d.Close(); err != nil {
			t.Fatal(err)
		}
		note, err := tearTail(filepath.Join(dir, "idempotency.json"), kind, rand.New(rand.NewPCG(1, 2)))
		if err != nil {
			t.Fatal(err)
		}
		d, err = file.Open(dir)
		if err != nil {
			t.Fatalf("%s: Open refused the folder: %v", note, err)
		}
		row, err := d.Get(ctx, key)
		d.Close()
		if err != nil || row.Response == nil || row.Response.Status != 201 {
			t.Fatalf("%s: the stored response is gone: %+v, %v", note, row, err)
		}
	}
}
