package groupscope.test;

import java.time.Duration;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;

import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;

/**
 * A stateless Kafka Streams app for groupscope's tests of streams groups (KIP-1071): reads
 * `input`, upper-cases each value and writes `output`, one stream thread, joining its group
 * with the streams rebalance protocol (`group.protocol=streams`). No state store, so RocksDB
 * is never loaded and the app runs on Kafka's own lib dir plus the kafka-streams jar.
 *
 * Usage: UpperStreams BOOTSTRAP APPLICATION_ID CLIENT_ID INPUT OUTPUT STATE_DIR
 * It prints its state changes ("STATE RUNNING", ...) and stops on SIGTERM; run it through
 * backend.proc.spawn so that it dies with the test process too.
 */
public final class UpperStreams {
    private UpperStreams() {
    }

    public static void main(String[] args) throws Exception {
        if (args.length != 6) {
            System.err.println("usage: UpperStreams BOOTSTRAP APPLICATION_ID CLIENT_ID INPUT OUTPUT STATE_DIR");
            System.exit(2);
        }
        Properties props = new Properties();
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, args[1]);
        props.put(StreamsConfig.CLIENT_ID_CONFIG, args[2]);
        props.put(StreamsConfig.GROUP_PROTOCOL_CONFIG, "streams");
        props.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, 1);
        props.put(StreamsConfig.STATE_DIR_CONFIG, args[5]);
        props.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        props.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        props.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 500);

        StreamsBuilder builder = new StreamsBuilder();
        builder.<String, String>stream(args[3])
                .mapValues(v -> v == null ? null : v.toUpperCase())
                .to(args[4]);

        KafkaStreams streams = new KafkaStreams(builder.build(), props);
        CountDownLatch failed = new CountDownLatch(1);
        streams.setStateListener((now, before) -> {
            System.out.println("STATE " + now);
            System.out.flush();
            if (now == KafkaStreams.State.ERROR) {
                failed.countDown();
            }
        });
        // SIGTERM: leave the group cleanly (the test's teardown); a SIGKILL needs nothing
        Runtime.getRuntime().addShutdownHook(new Thread(
                () -> streams.close(Duration.ofSeconds(5)), "shutdown"));
        streams.start();
        failed.await();  // the JVM ends on SIGTERM (after the hook) or here, on an error
        streams.close(Duration.ofSeconds(5));
        System.exit(1);
    }
}
