module github.com/okengine/oke

go 1.26
