module example.com/newapi

go 1.26

require github.com/okengine/oke v0.0.0

replace github.com/okengine/oke => ./oke
