package review

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"
)

// TTL is how long an answer of the API server is kept; MaxAnswers how many.
const (
	TTL        = time.Minute
	MaxAnswers = 10000
)

// Reviewer asks the API server, and keeps its answers.
type Reviewer struct {
	cs    kubernetes.Interface
	clock clock.PassiveClock

	mu      sync.Mutex
	answers map[[sha256.Size]byte]cached // by token and question
}

type cached struct {
	user    *authenticationv1.UserInfo // nil: the token is not accepted
	allowed bool
	until   time.Time
}

// New returns a Reviewer asking through cs.
func New(cs kubernetes.Interface) *Reviewer { return NewWithClock(cs, clock.RealClock{}) }

// NewWithClock is New with the clock answers expire by.
func NewWithClock(cs kubernetes.Interface, c clock.PassiveClock) *Reviewer {
	return &Reviewer{cs: cs, clock: c, answers: map[[sha256.Size]byte]cached{}}
}

// Token returns the bearer token of r, or "" if it has none.
func Token(r *http.Request) string {
	scheme, token, _ := strings.Cut(r.Header.Get("Authorization"), " ")
	if !strings.EqualFold(scheme, "Bearer") { // the scheme is case-insensitive (RFC 7235)
		return ""
	}
	return token
}

// Who returns the user token stands for, nil if the API server does not accept it.
func (v *Reviewer) Who(ctx context.Context, token string) (*authenticationv1.UserInfo, error) {
	key := v.key(token, nil, nil)
	if c, ok := v.get(key); ok {
		return c.user, nil
	}
	tr, err := v.cs.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
	if err != nil {
		return nil, err
	}
	var c cached
	if tr.Status.Authenticated {
		c.user = &tr.Status.User
	}
	v.put(key, c)
	return c.user, nil
}

// May reports whether the user of token (accepted by Who) may do what one of res and nonRes
// describes.
func (v *Reviewer) May(ctx context.Context, token string, user *authenticationv1.UserInfo, res *authorizationv1.ResourceAttributes, nonRes *authorizationv1.NonResourceAttributes) (bool, error) {
	key := v.key(token, res, nonRes)
	if c, ok := v.get(key); ok {
		return c.allowed, nil
	}
	extra := map[string]authorizationv1.ExtraValue{}
	for k, e := range user.Extra {
		extra[k] = authorizationv1.ExtraValue(e)
	}
	sar, err := v.cs.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: user.Username, UID: user.UID, Groups: user.Groups, Extra: extra,
		ResourceAttributes: res, NonResourceAttributes: nonRes,
	}}, metav1.CreateOptions{})
	if err != nil {
		return false, err
	}
	v.put(key, cached{allowed: sar.Status.Allowed})
	return sar.Status.Allowed, nil
}

func (v *Reviewer) key(token string, res *authorizationv1.ResourceAttributes, nonRes *authorizationv1.NonResourceAttributes) [sha256.Size]byte {
	q, _ := json.Marshal([]any{res, nonRes})
	return sha256.Sum256(append([]byte(token+"\x00"), q...))
}

func (v *Reviewer) get(key [sha256.Size]byte) (cached, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	c, ok := v.answers[key]
	if !ok || v.clock.Now().After(c.until) {
		return cached{}, false
	}
	return c, true
}

func (v *Reviewer) put(key [sha256.Size]byte, c cached) {
	c.until = v.clock.Now().Add(TTL)
	v.mu.Lock()
	defer v.mu.Unlock()
	if len(v.answers) >= MaxAnswers {
		clear(v.answers)
	}
	v.answers[key] = c
}
