package pgtest

import "testing"

func TestDSNEdits(t *testing.T) {
	for _, c := range []struct {
		dsn, db, key, value, wantDB, wantParam string
	}{
		{"postgres://u@h:5432/test?sslmode=disable", "x", "pool_max_conns", "6",
			"postgres://u@h:5432/x?sslmode=disable", "postgres://u@h:5432/test?sslmode=disable&pool_max_conns=6"},
		{"postgresql://u@h/test", "x", "application_name", "a b",
			"postgresql://u@h/x", "postgresql://u@h/test?application_name=a+b"},
		{"host=h user=u dbname=test", "x", "pool_max_conns", "6",
			"host=h user=u dbname=test dbname=x", "host=h user=u dbname=test pool_max_conns=6"},
	} {
		got, err := WithDatabase(c.dsn, c.db)
		if err != nil || got != c.wantDB {
			t.Errorf("WithDatabase(%q, %q) = %q, %v; want %q", c.dsn, c.db, got, err, c.wantDB)
		}
		if got := WithParam(c.dsn, c.key, c.value); got != c.wantParam {
			t.Errorf("WithParam(%q, %q, %q) = %q; want %q", c.dsn, c.key, c.value, got, c.wantParam)
		}
	}
	if _, err := WithDatabase("postgres://u@h:bad port/x", "y"); err == nil {
		t.Error("WithDatabase of a malformed URL: nil error")
	}
}
