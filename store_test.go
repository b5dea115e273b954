package oke_test

import (
	"testing"

	"github.com/okengine/oke"
)

// TestClassifySQL: a statement is classified by what it does, not by the
// method used to send it.
func TestClassifySQL(t *testing.T) {
	for _, c := range []struct {
		sql  string
		want oke.Effect
	}{
		{"SELECT * FROM charges", oke.EffectRead},
		{"  select id from charges where id = $1 FOR UPDATE", oke.EffectRead},
		{"-- comment\nSELECT 1", oke.EffectRead},
		{"/* INSERT */ SELECT 'DELETE FROM x'", oke.EffectRead},
		{"SELECT replace(name, 'a', 'b') FROM t", oke.EffectRead},
		{"SELECT * INTO backup FROM charges", oke.EffectWrite},
		{"SELECT nextval('charges_seq')", oke.EffectWrite},
		{"VALUES (1)", oke.EffectRead},
		{"SHOW search_path", oke.EffectRead},
		{"EXPLAIN DELETE FROM charges", oke.EffectRead},
		{"EXPLAIN ANALYZE DELETE FROM charges", oke.EffectWrite},
		{"WITH x AS (SELECT 1) SELECT * FROM x", oke.EffectRead},
		{"WITH moved AS (DELETE FROM a RETURNING *) INSERT INTO b SELECT * FROM moved", oke.EffectWrite},
		{"INSERT INTO charges (amount) VALUES ($1) RETURNING id", oke.EffectWrite},
		{"insert into charges default values", oke.EffectWrite},
		{"UPDATE charges SET amount = 1", oke.EffectWrite},
		{"DELETE FROM charges", oke.EffectWrite},
		{"MERGE INTO t USING s ON t.id = s.id WHEN MATCHED THEN DELETE", oke.EffectWrite},
		{"CREATE TABLE t (id int)", oke.EffectWrite},
		{"TRUNCATE charges", oke.EffectWrite},
		{"PRAGMA journal_mode", oke.EffectRead},
		{"PRAGMA journal_mode = WAL", oke.EffectWrite},
		{"BEGIN", oke.EffectRead},
		{"", oke.EffectWrite},
		{"$$ weird $$", oke.EffectWrite},
		{"SELECT $1::text", oke.EffectRead},
		{"SELECT $tag$ DELETE $tag$", oke.EffectRead},
		{"CALL do_things()", oke.EffectWrite},
		{"(SELECT 1)", oke.EffectRead},
	} {
		if got := oke.ClassifySQL(c.sql); got != c.want {
			t.Errorf("ClassifySQL(%q) = %s, want %s", c.sql, got, c.want)
		}
	}
}
