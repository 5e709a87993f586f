package cli

const (
	usr1 = 10
	usr2 = 12
	chld = 17
	cont = 18
	stop = 19
	tstp = 20
	urg  = 23
)
