package paymentsclient

// oke gen client writes oke_client_gen.go, the demo's typed client, from the
// flows of ../app; see docs/client.md. Regenerate after changing a flow or
// its types: the client's freshness test (extract/clientgen) fails until
// then.
//go:generate go tool oke gen client -o . -pkg paymentsclient ../app
