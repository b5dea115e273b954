package app

// oke extract writes the demo's contract (../oke.contract.json,
// ../openapi.json) and oke_contract_gen.go, which registers it; see
// docs/extract.md.
//go:generate go tool oke extract -o .. .
