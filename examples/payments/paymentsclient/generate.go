package paymentsclient

// oke gen client writes oke_client_gen.go, the demo's typed client, from the
// flows of ../app; see docs/client.md. It stands alone (copies of the app's
// types): a program using it links neither the demo nor its drivers.
// Regenerate after changing a flow or its types: the client's freshness
// test (extract/clientgen) fails until then. go tool oke is the oke command
// declared as a tool in this module's go.mod.
//go:generate go tool oke gen client -o . -pkg paymentsclient ../app
