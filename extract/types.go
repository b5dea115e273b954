package extract

import "go/types"

// FlowTypes returns the Go types of a flow's input and output as extract
// found them, for code generators (oke gen client, extract/clientgen): the
// type arguments of its constructor. out is nil for a stream or a live
// feed, which have no output type. ok is false when r has no flow of that
// name.
func (r *Result) FlowTypes(name string) (in, out types.Type, ok bool) {
	io := r.io[name]
	if io == nil {
		return nil, nil, false
	}
	return io.in, io.out, true
}

// ModulePath is the path of the main module the packages were loaded from.
func (r *Result) ModulePath() string { return r.modPath }
