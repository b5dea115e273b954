package admin

import (
	"encoding/json"
	"fmt"
	"sync"
)

// What the generated contract (oke.contract.json, written by oke extract)
// adds to the flows the app runs: for each inferred effect, the call chain
// that led to it ("why"), and a durable flow's constant step names. The app
// itself knows neither at run time, so an app that wants the console to show
// them registers its contract file.
var (
	contractMu sync.RWMutex
	contract   = map[string]contractFlow{}
)

type contractFlow struct {
	Name  string              `json:"name"`
	Why   map[string][]string `json:"why"`
	Steps []string            `json:"steps"`
}

// RegisterContract gives the admin surface an app's generated contract (the
// bytes of the oke.contract.json that oke extract wrote), so that the
// console's flows page shows, for each effect, why extract inferred it. A
// program embeds the file and registers it at start:
//
//	//go:embed oke.contract.json
//	var contractJSON []byte
//
//	func init() { admin.RegisterContract(contractJSON) }
//
// A later registration of a flow replaces the earlier one. It returns an
// error, and registers nothing, when b is not such a contract.
func RegisterContract(b []byte) error {
	var c struct {
		Version int            `json:"version"`
		Flows   []contractFlow `json:"flows"`
	}
	if err := json.Unmarshal(b, &c); err != nil {
		return fmt.Errorf("admin: register contract: %w", err)
	}
	if c.Version != 1 {
		return fmt.Errorf("admin: register contract: version %d, want 1 (an oke.contract.json written by oke extract)", c.Version)
	}
	contractMu.Lock()
	defer contractMu.Unlock()
	for _, f := range c.Flows {
		contract[f.Name] = f
	}
	return nil
}

func registered(name string) (contractFlow, bool) {
	contractMu.RLock()
	defer contractMu.RUnlock()
	f, ok := contract[name]
	return f, ok
}
