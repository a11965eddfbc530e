/*
 * EngineHost - what every Debezium runner of tests/bench/debezium shares:
 * reading its properties file ("engine.<key>" to the engine and connector,
 * "producer.<key>" to the KafkaProducer), and running Debezium 3.6.1's
 * embedded engine (Connect format: the handler gets each SourceRecord as the
 * transforms left it) on one thread until it stops.
 *
 * run() prints "<TAG> streaming <epoch ms>" once the connector's streaming
 * metrics say Connected=true (as Debezium's PostgresEndToEndPerf waits), and
 * "<TAG> engine failed: ..." when the engine ends in error. SIGTERM is the
 * graceful stop: the shutdown hook closes the engine (the engine commits its
 * offsets a last time), waits for it, then runs the caller's onStop (close
 * the producer, print figures).
 *
 * SPDX-License-Identifier: Apache-2.0
 */
package dev.outboxrelay.engine;

import io.debezium.embedded.Connect;
import io.debezium.engine.ChangeEvent;
import io.debezium.engine.DebeziumEngine;

import java.io.FileInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.lang.management.ManagementFactory;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Future;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;

import javax.management.MBeanServer;
import javax.management.ObjectName;

import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.connect.source.SourceRecord;

public final class EngineHost {

    /** The batch handler: the engine's ChangeConsumer in Connect format. */
    public interface Handler extends DebeziumEngine.ChangeConsumer<ChangeEvent<SourceRecord, SourceRecord>> {
    }

    /** What runs after the engine was closed by SIGTERM; stopped: it ended within the wait. */
    public interface OnStop {
        void stopped(boolean stopped);
    }

    /** A runner's properties file, split by prefix. */
    public static final class Props {
        public final Properties all = new Properties();
        public final Properties engine = new Properties();
        public final Properties producer = new Properties();
    }

    private EngineHost() {
    }

    /**
     * Marks a batch processed in order, each record only once Kafka has
     * acknowledged its send (null: nothing was sent for it), then the batch:
     * the offsets Debezium commits, and so the LSN it confirms to the slot,
     * never pass an event Kafka does not hold.
     */
    public static void awaitAndMark(List<Future<RecordMetadata>> sent,
            List<ChangeEvent<SourceRecord, SourceRecord>> records,
            DebeziumEngine.RecordCommitter<ChangeEvent<SourceRecord, SourceRecord>> committer)
            throws InterruptedException {
        for (int i = 0; i < records.size(); i++) {
            Future<RecordMetadata> f = sent.get(i);
            if (f != null) {
                try {
                    f.get();
                } catch (java.util.concurrent.ExecutionException e) {
                    throw new io.debezium.DebeziumException(e.getCause());
                }
            }
            committer.markProcessed(records.get(i));
        }
        committer.markBatchFinished();
    }

    public static Props load(String path) throws IOException {
        Props p = new Props();
        try (InputStream in = new FileInputStream(path)) {
            p.all.load(in);
        }
        for (String k : p.all.stringPropertyNames()) {
            if (k.startsWith("engine.")) {
                p.engine.setProperty(k.substring(7), p.all.getProperty(k));
            } else if (k.startsWith("producer.")) {
                p.producer.setProperty(k.substring(9), p.all.getProperty(k));
            }
        }
        return p;
    }

    /**
     * Run the engine with engineProps and handler until it stops; returns the
     * exit code (1 when the engine failed). tag prefixes the lines printed.
     */
    public static int run(String tag, Properties engineProps, Handler handler, OnStop onStop)
            throws Exception {
        final CountDownLatch done = new CountDownLatch(1);
        final int[] exitCode = {0};

        DebeziumEngine<ChangeEvent<SourceRecord, SourceRecord>> engine = DebeziumEngine.create(Connect.class)
                .using(engineProps)
                .notifying(handler)
                .using((boolean success, String message, Throwable error) -> {
                    if (!success) {
                        System.err.println(tag + " engine failed: " + message);
                        if (error != null) {
                            error.printStackTrace();
                        }
                        exitCode[0] = 1;
                    }
                    done.countDown();
                })
                .build();

        ExecutorService executor = Executors.newSingleThreadExecutor();
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            boolean stopped = false;
            try {
                engine.close();
                stopped = done.await(30, TimeUnit.SECONDS);
                executor.shutdown();
                executor.awaitTermination(10, TimeUnit.SECONDS);
            } catch (Exception e) {
                e.printStackTrace();
            }
            onStop.stopped(stopped);
            System.out.flush();
        }));
        executor.execute(engine);

        String server = engineProps.getProperty("topic.prefix", "");
        ObjectName metrics = new ObjectName(
                "debezium.postgres:type=connector-metrics,context=streaming,server=" + server);
        MBeanServer mbs = ManagementFactory.getPlatformMBeanServer();
        while (done.getCount() > 0) {
            try {
                if (mbs.isRegistered(metrics) && Boolean.TRUE.equals(mbs.getAttribute(metrics, "Connected"))) {
                    System.out.println(tag + " streaming " + System.currentTimeMillis());
                    System.out.flush();
                    break;
                }
            } catch (Exception e) {
                // not there yet
            }
            Thread.sleep(5);
        }
        done.await();
        return exitCode[0];
    }
}
