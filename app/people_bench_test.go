package app

import (
	"testing"

	"github.com/dmarcd/dmarcd/store"
	"github.com/dmarcd/dmarcd/store/storetest"
)

// BenchmarkPasswordVerify is the server time of one password check at
// the default argon2id parameters (the budget: 250 ms on the 2-core
// reference machine; docs/people.md has the figure).
func BenchmarkPasswordVerify(b *testing.B) {
	a := New(Config{Store: storetest.Open(b)})
	h := a.hashPassword("correct horse battery")
	b.ResetTimer()
	for b.Loop() {
		if !a.verifyPassword(h, "correct horse battery") {
			b.Fatal("no match")
		}
	}
}

// BenchmarkSignInPassword is a whole sign-in: the limiter, the account's
// lookup, argon2id, the session's write and the audit entry.
func BenchmarkSignInPassword(b *testing.B) {
	db := storetest.Open(b)
	a := New(Config{Store: db, AuthFailLimit: 1 << 30, AccountFailLimit: 1 << 30})
	org := storetest.MustOrganization(b, db, "o", store.PlanUnlimited)
	acc, err := db.CreateAccount("b@example.com")
	if err != nil {
		b.Fatal(err)
	}
	if _, err := db.AddMembership(org.ID, acc.ID, "owner"); err != nil {
		b.Fatal(err)
	}
	h := a.hashPassword("correct horse battery")
	if _, err := db.UpdateAccount(acc.ID, false, func(x *store.Account) error { x.PasswordHash = h; return nil }); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		if _, _, err := a.SignInPassword("192.0.2.1", "b@example.com", "correct horse battery", ""); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSignInFailure compares the two failures an attacker could
// tell apart by time: an unknown email and a wrong password (each runs
// one argon2id verification; the figures should be within noise).
func BenchmarkSignInFailure(b *testing.B) {
	db := storetest.Open(b)
	a := New(Config{Store: db, AuthFailLimit: 1 << 30, AccountFailLimit: 1 << 30})
	org := storetest.MustOrganization(b, db, "o", store.PlanUnlimited)
	acc, err := db.CreateAccount("b@example.com")
	if err != nil {
		b.Fatal(err)
	}
	if _, err := db.AddMembership(org.ID, acc.ID, "owner"); err != nil {
		b.Fatal(err)
	}
	h := a.hashPassword("correct horse battery")
	if _, err := db.UpdateAccount(acc.ID, false, func(x *store.Account) error { x.PasswordHash = h; return nil }); err != nil {
		b.Fatal(err)
	}
	a.dummy()
	for _, c := range []struct{ name, email string }{{"unknown-email", "nobody@example.com"}, {"wrong-password", "b@example.com"}} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				if _, _, err := a.SignInPassword("192.0.2.1", c.email, "not the password", ""); KindOf(err) != Unauthenticated {
					b.Fatal(err)
				}
			}
		})
	}
}
