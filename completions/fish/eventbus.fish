# fish completion for eventbus, generated from its declaration by eventbus-manual: do not edit.

# The bus options given on the line, to ask the same broker.
function __eventbus_bus
    set -l tokens (commandline -opc)
    set -l i 1
    while test $i -le (count $tokens)
        switch $tokens[$i]
            case -s --socket
                set i (math $i + 1)
                echo --socket
                echo $tokens[$i]
            case '--socket=*' --system --user
                echo $tokens[$i]
        end
        set i (math $i + 1)
    end
end
# The event types the running broker knows (nothing when none answers).
function __eventbus_types
    timeout (set -q EVENTBUS_COMPLETION_TIMEOUT; and echo $EVENTBUS_COMPLETION_TIMEOUT; or echo 2) eventbus (__eventbus_bus) types --format json 2>/dev/null | string replace -rf '^\{"type":"([^"]*)".*' '$1'
end
# Those types, their prefixes with '.>', and '>'.
function __eventbus_patterns
    for t in (__eventbus_types)
        echo $t
        while string match -q '*.*' -- $t
            set t (string replace -r '\.[^.]*$' '' -- $t)
            echo $t'.>'
        end
    end | sort -u
    echo '>'
end

complete -c eventbus -f
complete -c eventbus -s s -l socket -r -F -d 'broker socket'
complete -c eventbus -l system -d 'use the system bus /run/eventbus/bus.sock'
complete -c eventbus -l user -d 'use the user bus $XDG_RUNTIME_DIR/eventbus/bus.sock'
complete -c eventbus -s h -l help -d 'show this help'
complete -c eventbus -s V -l version -d 'show the version'
complete -c eventbus -n __fish_use_subcommand -a publish -d 'publish one event (or one per input line with --lines)'
complete -c eventbus -n __fish_use_subcommand -a listen -d 'print events as they arrive'
complete -c eventbus -n __fish_use_subcommand -a wait -d 'run CMD once subscribed, then wait for one event'
complete -c eventbus -n __fish_use_subcommand -a get -d 'print the retained event(s): the current value'
complete -c eventbus -n __fish_use_subcommand -a clear -d 'remove the retained event of TYPE'
complete -c eventbus -n __fish_use_subcommand -a stats -d 'show the broker\'s counters and your own usage'
complete -c eventbus -n __fish_use_subcommand -a clients -d 'list the connections you may see and what they hold'
complete -c eventbus -n __fish_use_subcommand -a types -d 'per-type counters: published, delivered, dropped'
complete -c eventbus -n __fish_use_subcommand -a top -d 'a live view: hot types, queues, who is behind'
complete -c eventbus -n __fish_use_subcommand -a request -d 'ask the service for TYPE and print its reply'
complete -c eventbus -n __fish_use_subcommand -a serve -d 'answer requests for TYPE by running CMD (or through stdin/stdout)'
complete -c eventbus -n __fish_use_subcommand -a ping -d 'check that the broker answers'
complete -c eventbus -n __fish_use_subcommand -a reload -d 'make the broker read its access policy again'
complete -c eventbus -n __fish_use_subcommand -a help -d 'show the help of COMMAND'
complete -c eventbus -n '__fish_seen_subcommand_from publish' -l string -x -d 'publish TEXT as a JSON string'
complete -c eventbus -n '__fish_seen_subcommand_from publish' -l source -x -d 'the event\'s source'
complete -c eventbus -n '__fish_seen_subcommand_from publish' -l id -x -d 'the event\'s id'
complete -c eventbus -n '__fish_seen_subcommand_from publish' -s p -l print-seq -d 'print the broker\'s sequence number of the event'
complete -c eventbus -n '__fish_seen_subcommand_from publish' -s l -l lines -d 'publish every line of standard input as one event, a JSON string, o...'
complete -c eventbus -n '__fish_seen_subcommand_from publish' -s j -l json-lines -d '--lines where every line is a JSON value'
complete -c eventbus -n '__fish_seen_subcommand_from publish' -s r -l retain -d 'also keep the event as the retained event of TYPE'
complete -c eventbus -n '__fish_seen_subcommand_from publish' -s k -l key -x -d 'a key of 1-255 bytes'
complete -c eventbus -n '__fish_seen_subcommand_from publish' -x -a '(__eventbus_types)'
complete -c eventbus -n '__fish_seen_subcommand_from listen' -s f -l format -x -a 'json pretty data cloudevents' -d 'json, pretty, data, cloudevents'
complete -c eventbus -n '__fish_seen_subcommand_from listen' -s j -l json -d 'the same as --format json'
complete -c eventbus -n '__fish_seen_subcommand_from listen' -s n -l count -x -d 'exit after N events'
complete -c eventbus -n '__fish_seen_subcommand_from listen' -s t -l timeout -x -d 'exit with status 124 when no event arrives for DURATION'
complete -c eventbus -n '__fish_seen_subcommand_from listen' -s r -l reconnect -d 'keep listening when the broker restarts'
complete -c eventbus -n '__fish_seen_subcommand_from listen' -l last -d 'print the retained event of every matching type first'
complete -c eventbus -n '__fish_seen_subcommand_from listen' -l since -x -d 'first print the events after SEQ that the broker\'s history still holds'
complete -c eventbus -n '__fish_seen_subcommand_from listen' -l resume -r -F -d 'remember in FILE where this listener got to'
complete -c eventbus -n '__fish_seen_subcommand_from listen' -s g -l group -x -d 'join the queue group NAME'
complete -c eventbus -n '__fish_seen_subcommand_from listen' -l overflow -x -a 'wait drop-new drop-old disconnect' -d 'what the broker does when this listener falls behind'
complete -c eventbus -n '__fish_seen_subcommand_from listen' -x -a '(__eventbus_patterns)'
complete -c eventbus -n '__fish_seen_subcommand_from wait' -s t -l timeout -x -d 'give up after DURATION'
complete -c eventbus -n '__fish_seen_subcommand_from wait' -s f -l format -x -a 'json pretty data cloudevents' -d 'json, pretty, data or cloudevents'
complete -c eventbus -n '__fish_seen_subcommand_from wait' -s j -l json -d 'the same as --format json'
complete -c eventbus -n '__fish_seen_subcommand_from wait' -s q -l quiet -d 'do not print the event'
complete -c eventbus -n '__fish_seen_subcommand_from wait' -l overflow -x -a 'wait drop-new drop-old disconnect' -d 'wait'
complete -c eventbus -n '__fish_seen_subcommand_from wait' -x -a '(__eventbus_patterns)'
complete -c eventbus -n '__fish_seen_subcommand_from get' -s f -l format -x -a 'json pretty data cloudevents' -d 'json, pretty, data or cloudevents'
complete -c eventbus -n '__fish_seen_subcommand_from get' -s j -l json -d 'the same as --format json'
complete -c eventbus -n '__fish_seen_subcommand_from get' -x -a '(__eventbus_patterns)'
complete -c eventbus -n '__fish_seen_subcommand_from clear' -x -a '(__eventbus_types)'
complete -c eventbus -n '__fish_seen_subcommand_from stats' -s f -l format -x -a 'table json' -d 'table, json'
complete -c eventbus -n '__fish_seen_subcommand_from stats' -s j -l json -d 'the same as --format json'
complete -c eventbus -n '__fish_seen_subcommand_from stats' -l prometheus -d 'print the Prometheus exposition instead'
complete -c eventbus -n '__fish_seen_subcommand_from stats' -l max-types -x -d 'per-type series for at most N types, the most published first'
complete -c eventbus -n '__fish_seen_subcommand_from stats' -l max-clients -x -d 'per-client series for at most N clients, the largest queues first'
complete -c eventbus -n '__fish_seen_subcommand_from stats' -l min-client-age -x -d 'per-client series only for connections at least DURATION old'
complete -c eventbus -n '__fish_seen_subcommand_from stats' -s o -l output -r -F -d 'replace FILE atomically'
complete -c eventbus -n '__fish_seen_subcommand_from clients' -s f -l format -x -a 'table json' -d 'table, json'
complete -c eventbus -n '__fish_seen_subcommand_from clients' -s j -l json -d 'the same as --format json'
complete -c eventbus -n '__fish_seen_subcommand_from types' -s f -l format -x -a 'table json' -d 'table'
complete -c eventbus -n '__fish_seen_subcommand_from types' -s j -l json -d 'the same as --format json'
complete -c eventbus -n '__fish_seen_subcommand_from types' -s n -l limit -x -d 'at most N types'
complete -c eventbus -n '__fish_seen_subcommand_from types' -x -a '(__eventbus_patterns)'
complete -c eventbus -n '__fish_seen_subcommand_from top' -s i -l interval -x -d 'time between polls'
complete -c eventbus -n '__fish_seen_subcommand_from top' -s n -l count -x -d 'stop after N polls'
complete -c eventbus -n '__fish_seen_subcommand_from top' -s f -l format -x -a 'view json' -d 'view'
complete -c eventbus -n '__fish_seen_subcommand_from top' -s j -l json -d 'the same as --format json'
complete -c eventbus -n '__fish_seen_subcommand_from top' -l queue-limit -x -d 'the queue size shown as a full bar'
complete -c eventbus -n '__fish_seen_subcommand_from request' -s t -l timeout -x -d 'how long the broker waits for a reply'
complete -c eventbus -n '__fish_seen_subcommand_from request' -s f -l format -x -a 'data json' -d 'data, json'
complete -c eventbus -n '__fish_seen_subcommand_from request' -s j -l json -d 'the same as --format json'
complete -c eventbus -n '__fish_seen_subcommand_from request' -l string -x -d 'send TEXT as a JSON string'
complete -c eventbus -n '__fish_seen_subcommand_from request' -s k -l key -x -d 'a key of 1-255 bytes'
complete -c eventbus -n '__fish_seen_subcommand_from request' -l source -x -d 'the request\'s source'
complete -c eventbus -n '__fish_seen_subcommand_from request' -l id -x -d 'the request\'s id'
complete -c eventbus -n '__fish_seen_subcommand_from request' -x -a '(__eventbus_types)'
complete -c eventbus -n '__fish_seen_subcommand_from serve' -s g -l group -x -d 'serve in the queue group NAME'
complete -c eventbus -n '__fish_seen_subcommand_from serve' -s c -l concurrency -x -d 'run COMMAND for up to N requests at once'
complete -c eventbus -n '__fish_seen_subcommand_from serve' -l string -d 'send COMMAND\'s standard output as a JSON string'
complete -c eventbus -n '__fish_seen_subcommand_from serve' -s j -l json -d 'print requests as JSON lines, read replies from standard input'
complete -c eventbus -n '__fish_seen_subcommand_from serve' -s n -l count -x -d 'exit 0 after answering N requests'
complete -c eventbus -n '__fish_seen_subcommand_from serve' -x -a '(__eventbus_patterns)'
complete -c eventbus -n '__fish_seen_subcommand_from ping' -s w -l wait -x -d 'keep trying'
complete -c eventbus -n '__fish_seen_subcommand_from reload' -s w -l wait -d 'wait for the outcome'
complete -c eventbus -n '__fish_seen_subcommand_from reload' -s t -l timeout -x -d 'give up after DURATION'
complete -c eventbus -n '__fish_seen_subcommand_from help' -s h -l help -d 'show this help'
complete -c eventbus -n '__fish_seen_subcommand_from help' -x -a 'publish listen wait get clear stats clients types top request serve ping reload help'
