package app

import (
	"context"
	"encoding/json"
	"sync"

	"github.com/okengine/oke"
)

// feedBuffer is how many events a slow /events client may fall behind
// before its feed is closed (it can reconnect).
const feedBuffer = 256

// ReadyEvent is the first event of every /events feed, sent as soon as the
// feed is subscribed, so that a client knows it will see every event emitted
// from then on.
const ReadyEvent = "ready"

// eventsFlow is demo.events: a live SSE feed of the events the app's flows
// emit (fx.Emit) for the caller's tenant, e.g. note.created,
// refund.created, webhook.received; another tenant's events never reach it.
// Each SSE event's name is the emitted event's name and its data is the
// payload.
func (s *Server) eventsFlow() *oke.LiveFlow[struct{}] {
	return oke.NewLive("demo.events", oke.Options{
		Effects:     []oke.Effect{oke.EffectRead},
		Description: "A live SSE feed of the events emitted by flows for the caller's tenant.",
	}, func(ctx context.Context, _ struct{}, fx *oke.Fx, send func(oke.Event) error) error {
		ch := make(chan oke.Event, feedBuffer)
		overflow := make(chan struct{})
		var once sync.Once
		tenant := fx.Identity().Tenant
		cancel := s.app.Subscribe(func(e oke.Event) {
			if e.Tenant != tenant {
				return // another tenant's: refunds, notes and webhooks are theirs
			}
			// Called in the emitting flow: never block it.
			select {
			case ch <- e:
			default:
				once.Do(func() { close(overflow) })
			}
		})
		defer cancel()
		ready, _ := json.Marshal(map[string]string{"feed": "demo.events"})
		if err := send(oke.Event{Name: ReadyEvent, Data: ready}); err != nil {
			return nil // the client left
		}
		for {
			select {
			case <-ctx.Done():
				return nil
			case <-s.quit: // (oke's App.Shutdown ends the feed's ctx too)
				return nil
			case <-overflow:
				s.log.Warn("payments: an /events client fell too far behind; closing its feed")
				return nil
			case e := <-ch:
				if err := send(e); err != nil {
					return nil // the client left
				}
			}
		}
	})
}
