package vet

import (
	"go/ast"
	"go/token"
	"os"
	"strings"

	"golang.org/x/tools/go/analysis"
)

// ignoreDirective is the comment that silences a diagnostic.
const ignoreDirective = "//oke:ignore"

// ignores are the lines silenced by an //oke:ignore REASON comment, per
// file: a comment after code on its line silences that line; a comment
// alone on its line silences the next one.
type ignores map[string]map[int]bool

func (ig ignores) silenced(fset *token.FileSet, pos token.Pos) bool {
	p := fset.Position(pos)
	return ig[p.Filename][p.Line]
}

// collectIgnores reads the //oke:ignore comments of the package's files and
// returns the lines they silence, and a finding for each one without a
// reason.
func collectIgnores(pass *analysis.Pass) (ignores, []finding) {
	ig := ignores{}
	var bare []finding
	for _, f := range pass.Files {
		tf := pass.Fset.File(f.Pos())
		if tf == nil {
			continue
		}
		var src []byte // read on the first directive of the file
		for _, cg := range f.Comments {
			for _, c := range cg.List {
				reason, ok := strings.CutPrefix(c.Text, ignoreDirective)
				if !ok || reason != "" && reason[0] != ' ' && reason[0] != '\t' {
					continue // not ours (//oke:ignored, /*oke:ignore*/)
				}
				if strings.TrimSpace(reason) == "" {
					bare = append(bare, finding{"ignorereason", c.Pos(),
						"//oke:ignore needs a reason: say why the line is safe to run again on every pick-up (//oke:ignore the value is only logged); without one it silences nothing"})
					continue
				}
				if src == nil {
					src = readFile(pass, tf.Name())
				}
				line := tf.Line(c.Pos())
				if alone(src, tf, c) {
					line++
				}
				if ig[tf.Name()] == nil {
					ig[tf.Name()] = map[int]bool{}
				}
				ig[tf.Name()][line] = true
			}
		}
	}
	return ig, bare
}

// alone reports whether only blanks come before comment c on its line.
// Without the file's text it says yes.
func alone(src []byte, tf *token.File, c *ast.Comment) bool {
	start, off := tf.Offset(tf.LineStart(tf.Line(c.Pos()))), tf.Offset(c.Pos())
	if src == nil || off > len(src) {
		return true
	}
	return strings.TrimSpace(string(src[start:off])) == ""
}

func readFile(pass *analysis.Pass, name string) []byte {
	read := pass.ReadFile
	if read == nil {
		read = os.ReadFile
	}
	b, err := read(name)
	if err != nil {
		return nil
	}
	return b
}
