#!/usr/bin/env perl
# A Leasehold worker written from docs/protocol.md alone (issue 45), in Perl 5 with core
# modules only. It runs the conformance task set (conformance.echo, conformance.fail,
# conformance.sleep) of the pool named by LEASEHOLD_POOL.
#
# Design: one process, one loop, no threads and no children, so that SIGSTOP freezes the
# whole worker (a zombie) and SIGKILL kills all of it. Every request is a short blocking
# HTTP::Tiny call except the lease long poll, which only uses the full wait_seconds while
# no job is in hand; with jobs in hand it polls with wait_seconds 0 so heartbeats are never
# held up behind it. Each job is a small state machine driven by timers: running (a sleep
# task heartbeating), finishing (a complete or fail being sent, retried) and gone.
use strict;
use warnings;
use HTTP::Tiny;
use JSON::PP;
use Time::HiRes qw(time sleep);
use POSIX qw(floor :errno_h :fcntl_h);

$| = 1;

my $LANGUAGE   = 'perl';
my $URL        = $ENV{LEASEHOLD_URL} || 'http://127.0.0.1:8080';
$URL =~ s{/+$}{};
my $POOL       = $ENV{LEASEHOLD_POOL} || 'conf';
my $WORKER_ID  = $ENV{LEASEHOLD_WORKER_ID} || "perl-$$";
my $MAX_JOBS   = int($ENV{LEASEHOLD_MAX_JOBS} || 4);
$MAX_JOBS = 1 if $MAX_JOBS < 1;
$MAX_JOBS = 10 if $MAX_JOBS > 10;    # the server's max_jobs limit
my $WAIT       = defined $ENV{LEASEHOLD_WAIT_SECONDS} && $ENV{LEASEHOLD_WAIT_SECONDS} ne ''
    ? int($ENV{LEASEHOLD_WAIT_SECONDS}) : 20;
$WAIT = 0 if $WAIT < 0;
$WAIT = 20 if $WAIT > 20;
my @TASKS = ('conformance.echo', 'conformance.fail', 'conformance.sleep');

my $JSON = JSON::PP->new->utf8->canonical->allow_nonref;
my $LEASE_HTTP = HTTP::Tiny->new(timeout => $WAIT + 15, agent => "leasehold-perl-worker/1 ",
                                 keep_alive => 1);
my $HTTP = HTTP::Tiny->new(timeout => 5, agent => "leasehold-perl-worker/1 ", keep_alive => 1);

my $stopping = 0;      # SIGTERM seen: no new lease request
my $exit_code = 0;
$SIG{TERM} = sub { $stopping = 1 };
$SIG{INT}  = sub { $stopping = 1 };
$SIG{PIPE} = 'IGNORE';

sub say_err { print STDERR "[perl-worker $WORKER_ID] @_\n" }

# ---------------------------------------------------------------- time
# ISO-8601 instant -> epoch seconds (float). Accepts a date, 'T' or ' ', hh:mm[:ss[.fff]],
# and 'Z' or +hh:mm / -hh:mm / +hhmm (no zone: UTC).
sub days_from_civil {
    my ($y, $m, $d) = @_;
    $y -= $m <= 2 ? 1 : 0;
    my $era = floor($y / 400);
    my $yoe = $y - $era * 400;
    my $doy = floor((153 * ($m + ($m > 2 ? -3 : 9)) + 2) / 5) + $d - 1;
    my $doe = $yoe * 365 + floor($yoe / 4) - floor($yoe / 100) + $doy;
    return $era * 146097 + $doe - 719468;
}

sub parse_instant {
    my ($s) = @_;
    return undef unless defined $s && !ref $s;
    $s =~ /^(\d{4})-(\d\d)-(\d\d)(?:[Tt ](\d\d):(\d\d)(?::(\d\d)(?:[.,](\d+))?)?)?\s*(Z|z|[+-]\d\d(?::?\d\d)?)?$/
        or return undef;
    my ($y, $mo, $d, $h, $mi, $se, $frac, $zone) = ($1, $2, $3, $4 // 0, $5 // 0, $6 // 0, $7, $8);
    my $t = days_from_civil($y, $mo, $d) * 86400 + $h * 3600 + $mi * 60 + $se;
    $t += ("0.$frac") + 0 if defined $frac;
    if (defined $zone && $zone =~ /^([+-])(\d\d):?(\d\d)?$/) {
        my $off = $2 * 3600 + ($3 // 0) * 60;
        $t -= $1 eq '+' ? $off : -$off;
    }
    return $t;
}

# ---------------------------------------------------------------- HTTP
# Returns (status, decoded body or undef, response).
sub post {
    my ($http, $path, $body, $headers) = @_;
    my $res = $http->request('POST', $URL . $path, {
        headers => { 'content-type' => 'application/json', 'accept' => 'application/json',
                     %{ $headers || {} } },
        content => $JSON->encode($body),
    });
    my $data;
    if (defined $res->{content} && length $res->{content}) {
        $data = eval { $JSON->decode($res->{content}) };
    }
    return ($res->{status}, $data, $res);
}

sub retry_after {
    my ($res) = @_;
    my $v = $res->{headers}{'retry-after'};
    $v = $v->[0] if ref $v eq 'ARRAY';
    return (defined $v && $v =~ /^\s*(\d+(?:\.\d+)?)\s*$/) ? $1 + 0 : undef;
}

sub is_retryable_status {
    my ($st) = @_;
    return $st == 429 || $st == 503 || $st == 500 || $st == 502 || $st == 504 || $st == 599;
}

sub error_code {
    my ($data) = @_;
    return (ref $data eq 'HASH' && ref $data->{error} eq 'HASH') ? ($data->{error}{code} // '') : '';
}

# ---------------------------------------------------------------- trace context
# The job's traceparent is its parent: each request made for a job carries a traceparent of
# a child span (same trace id, this worker's span id), and the job's tracestate.
sub child_traceparent {
    my ($tp) = @_;
    return undef unless defined $tp && !ref $tp;
    return undef unless $tp =~ /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})/;
    my ($ver, $trace, $flags) = ($1, $2, $4);
    return undef if $ver eq 'ff' || $trace =~ /^0+$/;
    my $span;
    do { $span = join '', map { sprintf '%02x', int(rand 256) } 1 .. 8 } while $span =~ /^0+$/;
    return "00-$trace-$span-$flags";
}

sub job_headers {
    my ($job) = @_;
    my %h;
    $h{traceparent} = $job->{span_traceparent} if defined $job->{span_traceparent};
    $h{tracestate} = $job->{tracestate}
        if defined $job->{span_traceparent} && defined $job->{tracestate} && !ref $job->{tracestate}
           && length $job->{tracestate};
    return \%h;
}

# ---------------------------------------------------------------- the log
sub log_event {
    my ($job, $event) = @_;
    my $file = ref $job->{payload} eq 'HASH' ? $job->{payload}{log} : undef;
    return unless defined $file && !ref $file && length $file;
    my $line = sprintf "%s %s %s %s %d\n", $event, $job->{job_id}, $LANGUAGE, $WORKER_ID,
        floor(time * 1000);
    my $fh;
    if (sysopen $fh, $file, O_WRONLY | O_APPEND | O_CREAT, 0644) {
        syswrite $fh, $line;
        close $fh;
    } else {
        say_err("cannot append to $file: $!");
    }
}

# ---------------------------------------------------------------- jobs
my %jobs;    # job_id => job state

sub start_job {
    my ($j) = @_;
    my $now = time;
    my $job = {
        job_id     => $j->{job_id},
        task       => $j->{task} // '',
        payload    => $j->{payload},
        attempt    => $j->{attempt},
        token      => $j->{lease}{token},
        expires_at => parse_instant($j->{lease}{expires_at}) // ($now + 2),
        timeout_at => parse_instant($j->{timeout_at}),
        traceparent => $j->{traceparent},
        tracestate => $j->{tracestate},
        span_traceparent => child_traceparent($j->{traceparent}),
        state      => 'running',
        received   => $now,
    };
    $job->{next_hb} = $now + ($job->{expires_at} - $now) / 3;
    $jobs{$job->{job_id}} = $job;
    my $task = $job->{task};
    my $p = ref $job->{payload} eq 'HASH' ? $job->{payload} : {};
    if ($task eq 'conformance.echo') {
        log_event($job, 'start');
        # The task set since the trace-context case: the trace context as leased (or null).
        finish_complete($job, { echo => $job->{payload}, language => $LANGUAGE,
                                worker_id => $WORKER_ID, attempt => $job->{attempt},
                                traceparent => $job->{traceparent},
                                tracestate => $job->{tracestate} });
    } elsif ($task eq 'conformance.fail') {
        my $succeed = $p->{succeed_on_attempt};
        if (defined $succeed && !ref $succeed && $job->{attempt} >= $succeed) {
            finish_complete($job, { attempt => $job->{attempt}, language => $LANGUAGE });
        } else {
            my $retryable = exists $p->{retryable} ? ($p->{retryable} ? 1 : 0) : 1;
            finish_fail($job, { type => 'ConformanceError',
                                message => (defined $p->{message} ? "$p->{message}" : 'boom') },
                        $retryable);
        }
    } elsif ($task eq 'conformance.sleep') {
        log_event($job, 'start');
        my $secs = $p->{seconds};
        $secs = 0 unless defined $secs && !ref $secs && $secs =~ /^-?\d+(?:\.\d*)?(?:[eE][-+]?\d+)?$/;
        $job->{sleep_seconds} = $p->{seconds};
        $job->{sleep_until} = $now + ($secs > 0 ? $secs : 0);
    } else {
        # Never asked for (we name only our tasks in `tasks`), but a job in the answer is
        # ours: fail it rather than leave it.
        finish_fail($job, { type => 'UnknownTask', message => "this worker does not run task '$task'" }, 0);
    }
}

sub drop_job {
    my ($job, $why) = @_;
    $job->{state} = 'gone';
    delete $jobs{$job->{job_id}};
    say_err("job $job->{job_id}: $why") if defined $why;
}

# The task's work stops (cancelled, lease lost, timeout): log `cancelled`, report nothing.
sub stop_job {
    my ($job, $why) = @_;
    log_event($job, 'cancelled') if $job->{task} eq 'conformance.sleep';
    drop_job($job, $why);
}

sub finish_complete {
    my ($job, $result) = @_;
    $job->{state} = 'finishing';
    $job->{finish} = { route => 'complete', body => { token => $job->{token}, result => $result } };
    $job->{finish_tries} = 0;
    $job->{next_finish} = time;
    send_finish($job);
}

sub finish_fail {
    my ($job, $error, $retryable) = @_;
    $job->{state} = 'finishing';
    $job->{finish} = { route => 'fail', body => { token => $job->{token}, error => $error,
                       retryable => ($retryable ? JSON::PP::true : JSON::PP::false) } };
    $job->{finish_tries} = 0;
    $job->{next_finish} = time;
    send_finish($job);
}

# One try of the job's finish. The reference workers try five times over about 6 s.
sub send_finish {
    my ($job) = @_;
    my $f = $job->{finish};
    $job->{finish_tries}++;
    my ($st, $data, $res) = post($HTTP, "/jobs/$job->{job_id}/$f->{route}", $f->{body}, job_headers($job));
    if ($st == 200) {
        drop_job($job);
        return;
    }
    if ($st == 413 && $f->{route} eq 'complete') {
        # A result over the limit: report it as PayloadTooLarge (never retried).
        my $size = length $JSON->encode($f->{body}{result});
        finish_fail($job, { type => 'PayloadTooLarge',
                            message => "result of $size bytes is over the server's limit" }, 0);
        return;
    }
    if ($st == 404 || $st == 409 || $st == 401 || $st == 403 || $st == 422 || $st == 413) {
        drop_job($job, "$f->{route} answered $st " . error_code($data) . "; nothing more reported");
        return;
    }
    if (is_retryable_status($st) && $job->{finish_tries} < 5) {
        my $delay = retry_after($res) // (0.2 * 2 ** ($job->{finish_tries} - 1));
        $delay = $delay * (0.75 + rand 0.5);
        $job->{next_finish} = time + $delay;
        return;
    }
    drop_job($job, "$f->{route} answered $st after $job->{finish_tries} tries; giving up");
}

sub send_heartbeat {
    my ($job) = @_;
    my $body = { token => $job->{token} };
    if ($job->{task} eq 'conformance.sleep') {
        $body->{progress} = { elapsed_seconds => 0 + sprintf('%.3f', time - $job->{received}) };
    }
    my ($st, $data, $res) = post($HTTP, "/jobs/$job->{job_id}/heartbeat", $body, job_headers($job));
    my $now = time;
    if ($st == 200 && ref $data eq 'HASH') {
        if ($data->{cancel_requested}) {
            stop_job($job, 'cancel requested');
            return;
        }
        my $exp = parse_instant($data->{expires_at});
        $job->{expires_at} = $exp if defined $exp;
        $job->{hb_failures} = 0;
        my $interval = ($job->{expires_at} - $now) / 3;
        $interval = 0.05 if $interval < 0.05;
        $job->{next_hb} = $now + $interval;
        return;
    }
    if ($st == 404 || $st == 409 || $st == 401 || $st == 403 || $st == 422) {
        stop_job($job, "heartbeat answered $st " . error_code($data));
        return;
    }
    # Unknown answer: retry until the lease's expires_at by our clock, then presume it lost.
    if ($now >= $job->{expires_at}) {
        stop_job($job, "heartbeat answered $st and the lease has expired; presumed lost");
        return;
    }
    my $n = ++$job->{hb_failures};
    my $delay = retry_after($res) // (0.1 * 2 ** ($n - 1));
    $delay = $delay * (0.75 + rand 0.5);
    my $left = $job->{expires_at} - $now;
    $delay = $left if $delay > $left;
    $delay = 0.02 if $delay < 0.02;
    $job->{next_hb} = $now + $delay;
}

# Drive every job whose timer is due. Returns the earliest next due time.
sub run_jobs {
    my $next = time + 1;
    for my $id (sort { ($jobs{$a}{received} <=> $jobs{$b}{received}) } keys %jobs) {
        my $job = $jobs{$id} or next;
        my $now = time;
        if ($job->{state} eq 'finishing') {
            send_finish($job) if $now >= $job->{next_finish};
        } elsif ($job->{state} eq 'running') {
            if ($now >= $job->{sleep_until}) {
                log_event($job, 'end');
                finish_complete($job, { slept => $job->{sleep_seconds}, language => $LANGUAGE,
                                        worker_id => $WORKER_ID });
            } elsif ($now >= $job->{next_hb}
                     || (defined $job->{timeout_at} && $now >= $job->{timeout_at} && !$job->{timeout_hb})) {
                $job->{timeout_hb} = 1 if defined $job->{timeout_at} && $now >= $job->{timeout_at};
                send_heartbeat($job);
            }
        }
        next unless $jobs{$id};
        if ($job->{state} eq 'finishing') {
            $next = $job->{next_finish} if $job->{next_finish} < $next;
        } elsif ($job->{state} eq 'running') {
            $next = $job->{next_hb} if $job->{next_hb} < $next;
            $next = $job->{sleep_until} if $job->{sleep_until} < $next;
            $next = $job->{timeout_at}
                if defined $job->{timeout_at} && !$job->{timeout_hb} && $job->{timeout_at} < $next;
        }
    }
    return $next;
}

# ---------------------------------------------------------------- leasing
my $lease_backoff = 0;
my $next_lease_at = 0;
my $said_ready = 0;

sub lease {
    my $in_hand = scalar keys %jobs;
    my $want = $MAX_JOBS - $in_hand;
    return if $want <= 0;
    # With jobs in hand a long poll would hold up their heartbeats: ask with no wait.
    my $wait = $in_hand ? 0 : $WAIT;
    unless ($said_ready) {
        print "ready\n";
        $said_ready = 1;
    }
    my ($st, $data, $res) = post($LEASE_HTTP, '/workers/lease', {
        pool => $POOL, tasks => \@TASKS, max_jobs => $want, wait_seconds => $wait,
        worker_id => $WORKER_ID, protocol => 1,
    });
    my $now = time;
    if ($st == 200 && ref $data eq 'HASH') {
        $lease_backoff = 0;
        my $got = ref $data->{jobs} eq 'ARRAY' ? $data->{jobs} : [];
        start_job($_) for @$got;
        # With jobs in hand, poll again soon (every quarter second or so).
        $next_lease_at = (keys %jobs) ? $now + 0.2 + rand 0.1 : $now;
        return;
    }
    if ($st == 401 || $st == 403 || $st == 422) {
        say_err("lease answered $st " . ($res->{content} // '') . "; stopping (retrying does not help)");
        $stopping = 1;
        $exit_code = 1;
        return;
    }
    # 429, 503, 5xx, a lost connection, or anything else: back off with jitter.
    $lease_backoff = $lease_backoff ? $lease_backoff * 2 : 0.2;
    $lease_backoff = 10 if $lease_backoff > 10;
    my $delay = retry_after($res) // ($lease_backoff * (0.5 + rand 0.5));
    say_err("lease answered $st; retrying in " . sprintf('%.2f', $delay) . ' s');
    $next_lease_at = $now + $delay;
}

# ---------------------------------------------------------------- main loop
while (1) {
    my $next = run_jobs();
    if ($stopping) {
        last unless %jobs;
    } elsif (keys %jobs < $MAX_JOBS && time >= $next_lease_at) {
        lease();
        next;
    } elsif (keys %jobs < $MAX_JOBS) {
        $next = $next_lease_at if $next_lease_at < $next;
    }
    my $pause = $next - time;
    $pause = 0.2 if $pause > 0.2;     # so a SIGTERM is seen quickly
    sleep $pause if $pause > 0.001;
}
print STDERR "[perl-worker $WORKER_ID] drained; exiting $exit_code\n";
exit $exit_code;
