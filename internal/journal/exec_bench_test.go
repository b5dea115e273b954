package journal

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/okengine/oke/driver"
	"github.com/okengine/oke/driver/file"
	"github.com/okengine/oke/driver/memory"
	"github.com/okengine/oke/internal/token"
)

// BenchmarkStep measures one fresh step on the memory journal: Next (no
// driver call), the function, SaveStep.
func BenchmarkStep(b *testing.B) {
	benchSteps(b, func() driver.Journal { return memory.New() })
}

// BenchmarkStepFile is BenchmarkStep on the file driver: Next, the function,
// and SaveStep, which returns after an fsync.
func BenchmarkStepFile(b *testing.B) {
	d, err := file.Open(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	benchSteps(b, func() driver.Journal { return d })
}

// benchSteps takes fresh steps, a thousand per run, each run on the journal
// fresh returns (off the clock).
func benchSteps(b *testing.B, fresh func() driver.Journal) {
	ctx := context.Background()
	names := make([]string, 1000)
	for i := range names {
		names[i] = "step " + strconv.Itoa(i)
	}
	result := []byte(`{"n":1,"name":"step 1"}`)
	pool := testPool(b)
	var x *Exec
	i := 0
	for b.Loop() {
		if i%1000 == 0 {
			b.StopTimer()
			if x != nil {
				x.Stop()
			}
			j := fresh()
			run, err := j.CreateRun(ctx, driver.Run{ID: token.RunID(), Flow: "f", Owner: "o"}, time.Minute)
			if err != nil {
				b.Fatal(err)
			}
			x = Start(pool, j, run, nil, "o", time.Minute, nil)
			b.StartTimer()
		}
		if _, _, err := x.Step(ctx, names[i%1000], func(context.Context) ([]byte, []byte, error) { return result, nil, nil }); err != nil {
			b.Fatal(err)
		}
		i++
	}
	x.Stop()
}
