// Package review asks the API server who a bearer token is (TokenReview) and what its user may
// do (SubjectAccessReview), and keeps the answers for a minute, so that a client polling every
// few seconds costs no review: the host's HTTP endpoints serve only those the API server
// vouches for, with the rights they already have.
package review
