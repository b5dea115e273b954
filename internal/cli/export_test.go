package cli

// BuildVersion is buildVersion, for tests.
var BuildVersion = buildVersion

// GoLineOf is goLineOf, for tests.
var GoLineOf = goLineOf
