package dev.dvmirror;

import java.lang.reflect.Field;
import java.lang.reflect.Modifier;
import java.util.ArrayList;
import java.util.List;
import org.apache.iceberg.IcebergBuild;
import org.apache.iceberg.ManifestFile;
import org.apache.iceberg.RowDelta;
import org.apache.iceberg.SnapshotSummary;

/**
 * The one place dv-mirror reaches into Iceberg's private members, for {@link
 * ContentFileBatch#stageDataManifests}: a row delta ({@code MergingSnapshotProducer}) has no public
 * way to take a manifest written outside it. {@code AppendFiles.appendManifest} does take one, but a
 * fast append can carry no delete files, and its summary counts only files and records, not what
 * {@code addRows} counts (sizes, partitions); {@code RowDelta} and {@code SnapshotUpdate} offer
 * nothing of the kind (Iceberg 1.12).
 *
 * <p>The members are looked up once, when this class loads, and checked by name, type and kind;
 * {@link #check} (run when the mirror's catalog starts, and by tests/iceberg/test_java_internals.py) fails
 * naming each member missing and the Iceberg version on the classpath, before anything is committed.
 * Run alone ({@code java -cp <jars> dev.dvmirror.IcebergInternals}) it prints the check.
 */
public final class IcebergInternals {
  static final String PRODUCER = "org.apache.iceberg.MergingSnapshotProducer";
  /** Manifests appended as they are: the snapshot inherits their snapshot id (format 2 on). */
  static final String APPEND_MANIFESTS = "appendManifests";
  /** What {@code addRows} adds to the snapshot summary (files, records, sizes, partitions). */
  static final String ADDED_DATA_FILES_SUMMARY = "addedDataFilesSummary";

  private static final Class<?> PRODUCER_CLASS;
  private static final Field APPEND_MANIFESTS_FIELD;
  private static final Field ADDED_DATA_FILES_SUMMARY_FIELD;
  private static final List<String> PROBLEMS = new ArrayList<>();

  static {
    Class<?> producer = null;
    try {
      producer = Class.forName(PRODUCER, false, IcebergInternals.class.getClassLoader());
    } catch (ClassNotFoundException | LinkageError e) {
      PROBLEMS.add("no class " + PRODUCER + " (" + e + ")");
    }
    PRODUCER_CLASS = producer;
    APPEND_MANIFESTS_FIELD = field(producer, APPEND_MANIFESTS, List.class);
    ADDED_DATA_FILES_SUMMARY_FIELD =
        field(producer, ADDED_DATA_FILES_SUMMARY, SnapshotSummary.Builder.class);
  }

  private IcebergInternals() {}

  /**
   * What this adapter relies on, when this Iceberg has it all (e.g. {@code Iceberg 1.12.0:
   * MergingSnapshotProducer.appendManifests (java.util.List), ...}); otherwise an {@link
   * IllegalStateException} naming each missing member and the Iceberg version.
   */
  public static String check() {
    if (!PROBLEMS.isEmpty()) {
      throw new IllegalStateException(
          "Iceberg "
              + icebergVersion()
              + " moved the private members dv-mirror's first-version manifests rely on ("
              + String.join("; ", PROBLEMS)
              + "): dv-mirror pins Iceberg 1.12 (jvm/pom.xml); update "
              + "jvm/src/main/java/dev/dvmirror/IcebergInternals.java for this version");
    }
    return "Iceberg "
        + icebergVersion()
        + ": "
        + describe(APPEND_MANIFESTS_FIELD)
        + ", "
        + describe(ADDED_DATA_FILES_SUMMARY_FIELD);
  }

  /** The row delta's manifests appended as they are (add to it to append one). */
  @SuppressWarnings("unchecked")
  static List<ManifestFile> appendManifests(RowDelta rowDelta) {
    return (List<ManifestFile>) get(APPEND_MANIFESTS_FIELD, rowDelta);
  }

  /** The row delta's summary of added data files (count a file into it as {@code addRows} does). */
  static SnapshotSummary.Builder addedDataFilesSummary(RowDelta rowDelta) {
    return (SnapshotSummary.Builder) get(ADDED_DATA_FILES_SUMMARY_FIELD, rowDelta);
  }

  public static void main(String[] args) {
    System.out.println(check());
  }

  private static Object get(Field field, RowDelta rowDelta) {
    check();
    if (!PRODUCER_CLASS.isInstance(rowDelta)) {
      throw new IllegalStateException(
          "Iceberg "
              + icebergVersion()
              + "'s row delta "
              + rowDelta.getClass().getName()
              + " is not a "
              + PRODUCER
              + ": dv-mirror pins Iceberg 1.12 (jvm/pom.xml)");
    }
    try {
      return field.get(rowDelta);
    } catch (IllegalAccessException e) {
      throw new IllegalStateException("cannot read " + describe(field), e);
    }
  }

  /** The private instance field {@code name} of {@code owner}, of a type assignable to {@code type}. */
  private static Field field(Class<?> owner, String name, Class<?> type) {
    if (owner == null) {
      return null;
    }
    String member = owner.getSimpleName() + "." + name;
    Field found;
    try {
      found = owner.getDeclaredField(name);
    } catch (NoSuchFieldException e) {
      PROBLEMS.add("no field " + member);
      return null;
    } catch (LinkageError e) {
      PROBLEMS.add("the fields of " + owner.getName() + " cannot be read (" + e + ")");
      return null;
    }
    if (Modifier.isStatic(found.getModifiers()) || !type.isAssignableFrom(found.getType())) {
      PROBLEMS.add(
          member + " is a " + found.getType().getName() + " (expected an instance " + type.getName() + ")");
      return null;
    }
    try {
      found.setAccessible(true);
    } catch (RuntimeException e) {
      PROBLEMS.add(member + " cannot be made accessible: " + e);
      return null;
    }
    return found;
  }

  private static String describe(Field field) {
    return field.getDeclaringClass().getSimpleName()
        + "."
        + field.getName()
        + " ("
        + field.getType().getName()
        + ")";
  }

  private static String icebergVersion() {
    try {
      return IcebergBuild.version();
    } catch (RuntimeException | LinkageError e) {
      return "(unknown version)";
    }
  }
}
