package cli

// BuildVersion is buildVersion, for tests.
var BuildVersion = buildVersion
